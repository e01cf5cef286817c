--[[
  The "batch finished" rule, in one place (queue/batch/): a sealed batch whose outcomes cover every
  enqueued plate gets its finishedAt, once. Included by batch-record (the last outcome lands) and
  batch-seal (every plate had an outcome before the input ended).
  finishIfDone(batchKey, now) → true when this call finished the batch.
  The finish is published on the channel `<batchKey>:finished` (keys.ts batchFinished), so whoever
  waits for it (the library's batch.done()) hears it instead of asking again.
]]
local function finishIfDone(batchKey, now)
  local b = redis.call('HMGET', batchKey, 'enqueued', 'done', 'failed', 'sealed', 'finishedAt')
  if b[4] == '1' and not b[5] and (tonumber(b[2] or '0') + tonumber(b[3] or '0')) >= tonumber(b[1] or '0') then
    redis.call('HSET', batchKey, 'finishedAt', now)
    redis.call('PUBLISH', batchKey .. ':finished', now)
    return true
  end
  return false
end
