--[[
  Takes an in-flight slot of the account for a create (queue/inflight.ts); the rule is
  includes/inflight-take.lua, shared with create-admit.
    KEYS[1] zset of job ids in flight (score: when taken); KEYS[2] hash batch id -> slots held
    ARGV[1] job id (<batch>.<plate>); ARGV[2] batch id; ARGV[3] cap; ARGV[4] now; ARGV[5] job key prefix
  Returns 1 when the job holds a slot (or already did), 0 when the cap is reached.
]]
--- @include "inflight-take"
local room = inflightRoom(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[3]), ARGV[5])
if room == 'full' then return 0 end
if room == 'room' then inflightTake(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[4]) end
return 1
