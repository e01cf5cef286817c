--[[
  Puts a batch with creates waiting into its account's class (queue/scheduler.ts). A newcomer
  starts at the smallest pass of the batches already there: it shares the rate from the moment
  it arrives, neither waiting behind them nor catching up on what they were served. The account
  becomes active (worker processes feed it and run a Worker for it; sched-feed takes it out when
  it has nothing left).
    KEYS[1] the account's class zset (batch id -> pass); KEYS[2] hash batch id -> weight;
    KEYS[3] the active accounts zset
    ARGV[1] batch id; ARGV[2] weight; ARGV[3] account id; ARGV[4] now, epoch ms
  Returns 1 when enlisted now, 0 when it already was.
]]
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
redis.call('ZADD', KEYS[1], head[2] or 0, ARGV[1])
return 1
