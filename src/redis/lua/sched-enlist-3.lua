--[[
  Puts a batch with creates waiting into its account's class (queue/scheduler.ts). A newcomer
  starts at the smallest pass of the batches already there: it shares the rate from the moment
  it arrives, neither waiting behind them nor catching up on what they were served. The account
  becomes active (worker processes feed it and run a Worker for it; sched-feed takes it out when
  it has nothing left): its flag is set, with a new generation when it was off. The flag lives on
  the account's slot; the global list of active accounts is told after (Scheduler.announce), with
  that generation, so a feed that found the account idle earlier cannot take it off the list.
    KEYS[1] the account's class zset (batch id -> pass); KEYS[2] the account's hash batch id -> weight;
    KEYS[3] the account's active flag (hash: on '1' while active, gen a counter)
    ARGV[1] batch id; ARGV[2] weight
  Returns 1 when enlisted now, 0 when it already was.
]]
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if redis.call('HGET', KEYS[3], 'on') ~= '1' then
  redis.call('HSET', KEYS[3], 'on', '1')
  redis.call('HINCRBY', KEYS[3], 'gen', 1)
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
redis.call('ZADD', KEYS[1], head[2] or 0, ARGV[1])
return 1
