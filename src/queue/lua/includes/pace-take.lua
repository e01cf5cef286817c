--[[
  The pace's rule, in one place (queue/line.ts): the account's next request slot on Redis's
  clock. Slots are spaced by the pacing interval, so every worker on every machine shares one
  schedule; a hold (429, quota) moves the next slot to its end. The learned estimate in the same
  hash (pace-learn) gives the interval of an `auto` account, and, for a configured rate the
  upstream refused with 429s, a longer one than configured until it climbs back; the slots taken
  are counted so the learner knows whether the rate in force was used.
  Included by pace-acquire and create-admit.
  paceNext(paceKey, interval, mode) → the slot's start, its wait from now (ms), 'pace'|'hold', and
    what paceTake needs; mode 'auto' (the learned interval) | 'cap' (never faster than configured).
  paceTake(paceKey, next, retake) reserves it; retake '1': the request gave up a slot it had (a
    hold came, or it woke too late), so this one is not counted as used again.
]]
local function paceNext(paceKey, interval, mode)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  local f = redis.call('HMGET', paceKey, 'tat', 'hold', 'interval', 'used')
  if f[3] then
    if mode == 'auto' then interval = tonumber(f[3]) else interval = math.max(interval, tonumber(f[3])) end
  end
  local start = math.max(tonumber(f[1] or '0'), now)
  local reason = 'pace'
  local hold = tonumber(f[2] or '0')
  if hold > start then
    start = hold
    reason = 'hold'
  end
  return { start = start, wait = start - now, reason = reason, interval = interval, used = tonumber(f[4] or '0') }
end

local function paceTake(paceKey, next, retake)
  if retake ~= '1' then
    redis.call('HSET', paceKey, 'tat', tostring(next.start + next.interval), 'used', tostring(next.used + 1))
  else
    redis.call('HSET', paceKey, 'tat', tostring(next.start + next.interval))
  end
end
