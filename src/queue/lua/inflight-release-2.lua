--[[
  Gives back a job's in-flight slot (queue/inflight.ts).
    KEYS[1] zset of job ids in flight; KEYS[2] hash batch id -> slots held
    ARGV[1] job id; ARGV[2] batch id
]]
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('HINCRBY', KEYS[2], ARGV[2], -1) <= 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
return 1
