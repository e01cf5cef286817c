--[[
  Reserves the account's next request slot when it is near enough (queue/accounts.ts).
  Slots are spaced by the pacing interval on Redis's clock, so every worker on every machine
  shares one schedule; a hold (429, quota) moves the next slot to its end.
    KEYS[1] the account's pace hash: tat (next free slot, ms), hold (no request before, ms),
            extra (adaptive spacing added to the interval, ms)
    ARGV[1] pacing interval, ms (decimals allowed)
    ARGV[2] horizon, ms: only a slot at most this far away is reserved
  Returns {reserved 1|0, wait ms, 'pace'|'hold'}: reserved → the caller sleeps `wait` and sends;
  not reserved → nothing changed, the slot is `wait` away.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local f = redis.call('HMGET', KEYS[1], 'tat', 'hold', 'extra')
local start = math.max(tonumber(f[1] or '0'), now)
local reason = 'pace'
local hold = tonumber(f[2] or '0')
if hold > start then
  start = hold
  reason = 'hold'
end
local wait = start - now
if wait > tonumber(ARGV[2]) then return {0, tostring(wait), reason} end
redis.call('HSET', KEYS[1], 'tat', tostring(start + tonumber(ARGV[1]) + tonumber(f[3] or '0')))
return {1, tostring(wait), reason}
