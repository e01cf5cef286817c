--[[
  Takes an in-flight slot of the account for a create (queue/inflight.ts). When the cap is
  reached, the oldest slots are checked first: a job removed by hand while its query was in
  flight would otherwise hold its slot for ever.
    KEYS[1] zset of job ids in flight (score: when taken); KEYS[2] hash batch id -> slots held
    ARGV[1] job id (<batch>.<plate>); ARGV[2] batch id; ARGV[3] cap; ARGV[4] now; ARGV[5] job key prefix
  Returns 1 when the job holds a slot (or already did), 0 when the cap is reached.
]]
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, 9)) do
    if redis.call('EXISTS', ARGV[5] .. member) == 0 then
      redis.call('ZREM', KEYS[1], member)
      local batch = string.match(member, '^(.*)%.')
      if batch and redis.call('HINCRBY', KEYS[2], batch, -1) <= 0 then redis.call('HDEL', KEYS[2], batch) end
    end
  end
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
return 1
