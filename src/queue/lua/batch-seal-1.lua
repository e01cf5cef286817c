--[[
  Marks a batch's input complete (queue/batches.ts): from now on its last outcome finishes it,
  and if every plate already has one it is finished now.
    KEYS[1] the batch hash
    ARGV[1] now, epoch ms
  Returns -1 no such batch, 1 sealed, 2 sealed and finished.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'sealed', '1')
local b = redis.call('HMGET', KEYS[1], 'enqueued', 'done', 'failed', 'finishedAt')
if not b[4] and (tonumber(b[2] or '0') + tonumber(b[3] or '0')) >= tonumber(b[1] or '0') then
  redis.call('HSET', KEYS[1], 'finishedAt', ARGV[1])
  return 2
end
return 1
