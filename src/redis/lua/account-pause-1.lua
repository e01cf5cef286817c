--[[
  Records why an account is paused, once (queue/line.ts): the caller logs the fatal line
  only when this returns 1, so a thousand failing jobs make one line.
  A key failure of a request sent before the account's last resume (`resumedAt`) is old news:
  the operator fixed the key since (rotated the file, granted the permission), and the request
  only came back late (it waited out a hold, or the upstream was slow). It pauses nothing.
    KEYS[1] the account's line hash
    ARGV[1] code; ARGV[2] message; ARGV[3] epoch ms
    ARGV[4] epoch ms the failed request was sent ('' for an operator's pause)
  Returns 1 (recorded), 0 (already paused for this code), -1 (the request predates the resume).
]]
if ARGV[4] ~= '' then
  local resumedAt = tonumber(redis.call('HGET', KEYS[1], 'resumedAt'))
  if resumedAt and tonumber(ARGV[4]) <= resumedAt then return -1 end
end
if redis.call('HGET', KEYS[1], 'code') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'code', ARGV[1], 'message', ARGV[2], 'at', ARGV[3])
return 1
