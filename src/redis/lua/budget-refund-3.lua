--[[
  Gives back a reserved create that certainly did not happen (queue/budget.ts).
    KEYS[1] the batch's budget hash; KEYS[2] day counter; KEYS[3] month counter
]]
if tonumber(redis.call('HGET', KEYS[1], 'reserved') or '0') > 0 then redis.call('HINCRBY', KEYS[1], 'reserved', -1) end
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then redis.call('DECR', KEYS[2]) end
if tonumber(redis.call('GET', KEYS[3]) or '0') > 0 then redis.call('DECR', KEYS[3]) end
return 1
