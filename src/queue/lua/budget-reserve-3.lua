--[[
  Reserves one create against every spending cap before it is sent (queue/budget.ts), so a cap
  of N stops at exactly N.
    KEYS[1] the batch's budget hash (max, reserved); KEYS[2] the account's day counter;
    KEYS[3] the account's month counter
    ARGV[1] day cap, ARGV[2] month cap (-1 = none); ARGV[3] day TTL s; ARGV[4] month TTL s
  Returns 'ok', or which cap is reached: 'batch' | 'day' | 'month'.
]]
local maxB = tonumber(redis.call('HGET', KEYS[1], 'max') or '-1')
if maxB >= 0 and tonumber(redis.call('HGET', KEYS[1], 'reserved') or '0') >= maxB then return 'batch' end
local capD, capM = tonumber(ARGV[1]), tonumber(ARGV[2])
if capD >= 0 and tonumber(redis.call('GET', KEYS[2]) or '0') >= capD then return 'day' end
if capM >= 0 and tonumber(redis.call('GET', KEYS[3]) or '0') >= capM then return 'month' end
redis.call('HINCRBY', KEYS[1], 'reserved', 1)
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('INCR', KEYS[3])
redis.call('EXPIRE', KEYS[3], ARGV[4])
return 'ok'
