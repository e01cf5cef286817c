--[[
  Reserves the account's next request slot when it is near enough (queue/line.ts).
  Slots are spaced by the pacing interval on Redis's clock, so every worker on every machine
  shares one schedule; a hold (429, quota) moves the next slot to its end. The learned estimate
  in the same hash (pace-learn) gives the interval of an `auto` account, and, for a configured
  rate the upstream refused with 429s, a longer one than configured until it climbs back; the
  slots taken are counted so the learner knows whether the rate in force was used.
    KEYS[1] the account's pace hash: tat (next free slot, ms), hold (no request before, ms),
            interval (learned, ms), used (slots since the learner last looked)
    ARGV[1] pacing interval, ms (decimals allowed): the configured one, or the start of `auto`
    ARGV[2] horizon, ms: only a slot at most this far away is reserved
    ARGV[3] 'auto' (the learned interval in force) | 'cap' (a configured rate: never faster than it)
    ARGV[4] '1' when the request gave up a slot it had reserved (a hold came, or it woke too late):
            the new slot is not counted as used again, or the learner would see fewer refusals
            than there were
  Returns {reserved 1|0, wait ms, 'pace'|'hold'}: reserved → the caller sleeps `wait` and sends;
  not reserved → nothing changed, the slot is `wait` away.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local f = redis.call('HMGET', KEYS[1], 'tat', 'hold', 'interval')
local interval = tonumber(ARGV[1])
if f[3] then
  if ARGV[3] == 'auto' then interval = tonumber(f[3]) else interval = math.max(interval, tonumber(f[3])) end
end
local start = math.max(tonumber(f[1] or '0'), now)
local reason = 'pace'
local hold = tonumber(f[2] or '0')
if hold > start then
  start = hold
  reason = 'hold'
end
local wait = start - now
if wait > tonumber(ARGV[2]) then return {0, tostring(wait), reason} end
redis.call('HSET', KEYS[1], 'tat', tostring(start + interval))
if ARGV[4] ~= '1' then redis.call('HINCRBY', KEYS[1], 'used', 1) end
return {1, tostring(wait), reason}
