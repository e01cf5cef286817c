--[[
  The in-flight cap's rule, in one place (queue/inflight.ts): may this create hold one of the
  account's in-flight slots? When the cap is reached, the oldest slots are checked first: a job
  removed by hand while its query was in flight would otherwise hold its slot for ever.
  Included by inflight-acquire and create-admit.
  inflightRoom(setKey, byBatchKey, jobId, cap, jobPrefix) → 'held' (the job holds one already),
    'room' (it may take one: inflightTake), 'full'.
  inflightTake(setKey, byBatchKey, jobId, batchId, now) takes it.
]]
local function inflightRoom(setKey, byBatchKey, jobId, cap, jobPrefix)
  if redis.call('ZSCORE', setKey, jobId) then return 'held' end
  if redis.call('ZCARD', setKey) < cap then return 'room' end
  for _, member in ipairs(redis.call('ZRANGE', setKey, 0, 9)) do
    if redis.call('EXISTS', jobPrefix .. member) == 0 then
      redis.call('ZREM', setKey, member)
      local batch = string.match(member, '^(.*)%.')
      if batch and redis.call('HINCRBY', byBatchKey, batch, -1) <= 0 then redis.call('HDEL', byBatchKey, batch) end
    end
  end
  if redis.call('ZCARD', setKey) < cap then return 'room' end
  return 'full'
end

local function inflightTake(setKey, byBatchKey, jobId, batchId, now)
  redis.call('ZADD', setKey, now, jobId)
  redis.call('HINCRBY', byBatchKey, batchId, 1)
end
