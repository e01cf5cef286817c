--[[
  Gives back a job's in-flight slot (queue/inflight.ts; the rule is includes/inflight-release.lua,
  shared with plate-settle).
    KEYS[1] zset of job ids in flight; KEYS[2] hash batch id -> slots held
    ARGV[1] job id; ARGV[2] batch id
]]
--- @include "inflight-release"
return releaseInflight(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
