--[[
  Records why an account is paused, once (queue/line.ts): the caller logs the fatal line
  only when this returns 1, so a thousand failing jobs make one line.
    KEYS[1] the account's line hash
    ARGV[1] code; ARGV[2] message; ARGV[3] epoch ms
]]
if redis.call('HGET', KEYS[1], 'code') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'code', ARGV[1], 'message', ARGV[2], 'at', ARGV[3])
return 1
