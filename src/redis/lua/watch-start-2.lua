--[[
  Starts a watch's next round (watch/store.ts startRound, for watch/rounds.ts) only if the watch is
  neither paused nor already past the round the caller read. The check and the writes are one
  step: a `vqb watch pause` answered before this runs starts nothing (read and written apart, a
  pause could land between them: a CI run saw round 4 start after the pause had answered), and of
  two processes that read the same round only one starts the next.
    KEYS[1] the watch's hash; KEYS[2] its rounds hash (round -> record JSON)
    ARGV[1] the round the caller read (the hash's `round`, 0 when unset); ARGV[2] the new round;
    ARGV[3] its record (JSON); ARGV[4] how many field/value pairs follow to set, then those pairs,
    then the fields to delete
  Returns 1 when the round was started; 0 when the watch is paused, gone or another round began.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'paused') == '1' then return 0 end
if (redis.call('HGET', KEYS[1], 'round') or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local pairs = tonumber(ARGV[4])
local i = 5
if pairs > 0 then
  local set = {}
  for j = i, i + 2 * pairs - 1 do set[#set + 1] = ARGV[j] end
  redis.call('HSET', KEYS[1], unpack(set))
end
i = i + 2 * pairs
if i <= #ARGV then redis.call('HDEL', KEYS[1], unpack(ARGV, i)) end
return 1
