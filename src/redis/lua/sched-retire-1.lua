--[[
  Takes an account off the global list of active accounts (queue/scheduler.ts), after a feed found
  it idle and cleared its flag at generation ARGV[2]. An account made active again since (a
  higher generation, announced by whoever set its flag) stays listed: the two happen on different
  slots, so only the generation orders them.
    KEYS[1] the active accounts zset (account id -> generation)
    ARGV[1] account id; ARGV[2] the generation the feed cleared
  Returns 1 when removed.
]]
local gen = redis.call('ZSCORE', KEYS[1], ARGV[1])
if gen and tonumber(gen) <= tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
