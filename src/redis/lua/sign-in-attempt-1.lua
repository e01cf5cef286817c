--[[
  A console sign-in attempt from one address (console/throttle.ts). Counted before the token is
  checked, so attempts sent all at once cannot all pass a check made before any of them failed;
  an attempt that did not fail (signed in, or refused before its token was looked at) is given
  back. The window starts with the first attempt counted and does not move.
    KEYS[1] the address's count
    ARGV[1] 'take' or 'refund'; ARGV[2] the window, ms; ARGV[3] most attempts counted in the window
  Returns {1 when the attempt may go on, 0 when refused; ms left in the window}.
]]
if ARGV[1] == 'refund' then
  -- Never a count without its window: an expired key stays gone.
  if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('DECR', KEYS[1]) end
  return {1, 0}
end
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  ttl = tonumber(ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if n > tonumber(ARGV[3]) then return {0, ttl} end
return {1, ttl}
