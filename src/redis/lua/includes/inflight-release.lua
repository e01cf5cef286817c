--[[
  Giving back a job's in-flight slot, in one place (queue/inflight.ts). Included by
  inflight-release and plate-settle.
  releaseInflight(inflightKey, byBatchKey, jobId, batchId) → 1 released, 0 the job held none.
]]
local function releaseInflight(inflightKey, byBatchKey, jobId, batchId)
  if redis.call('ZREM', inflightKey, jobId) == 0 then return 0 end
  if redis.call('HINCRBY', byBatchKey, batchId, -1) <= 0 then redis.call('HDEL', byBatchKey, batchId) end
  return 1
end
