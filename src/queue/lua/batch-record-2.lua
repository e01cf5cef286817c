--[[
  Stores a plate's terminal outcome unless one exists, and moves the batch's counts in the same
  step (queue/batches.ts). The batch is finished when its last plate lands. This is the one
  place the "batch finished" rule lives besides batch-seal (which applies it when sealing).
    KEYS[1] the batch's outcomes hash; KEYS[2] the batch hash
    ARGV[1] plate; ARGV[2] the outcome, packed (queue/compact.ts); ARGV[3] 'done' | 'failed'; ARGV[4] now, epoch ms;
    ARGV[5] '1' when a possible duplicate charge
  Returns 0 an outcome existed, 1 recorded, 2 recorded and the batch finished.
]]
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
if ARGV[5] == '1' then redis.call('HINCRBY', KEYS[2], 'possibleDuplicates', 1) end
local b = redis.call('HMGET', KEYS[2], 'enqueued', 'done', 'failed', 'sealed', 'finishedAt')
if b[4] == '1' and not b[5] and (tonumber(b[2] or '0') + tonumber(b[3] or '0')) >= tonumber(b[1] or '0') then
  redis.call('HSET', KEYS[2], 'finishedAt', ARGV[4])
  return 2
end
return 1
