--[[
  The cost counters' rule, in one place (queue/costs.ts): one more of each field for the batch and
  for the UTC day. The day hash gets its time to live when a field of it is first counted (a new
  day's hash starts so), not on every count: most counts are then two HINCRBYs and nothing else.
  Included by cost-count and job-fence (a create's answer is counted in the write that stores it).
  countCosts(batchKey, dayKey, dayTtlS, fields) with fields a comma-separated list ('' = none).
]]
local function countCosts(batchKey, dayKey, dayTtlS, fields)
  for field in string.gmatch(fields, '[^,]+') do
    redis.call('HINCRBY', batchKey, field, 1)
    if redis.call('HINCRBY', dayKey, field, 1) == 1 then redis.call('EXPIRE', dayKey, dayTtlS) end
  end
end
