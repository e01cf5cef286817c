--[[
  Extends a lock only if this holder still owns it (src/redis/layout.ts: one key layout migration at a
  time, refreshed while it runs; a GET then PEXPIRE could lengthen another holder's lock).
    KEYS[1] the lock; ARGV[1] the holder's token; ARGV[2] the new time to live, ms
  Returns 1 when extended, 0 when the lock is no longer this holder's.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
