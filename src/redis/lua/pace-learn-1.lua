--[[
  Learns the rate of an account whose limit is `auto` (queue/line.ts), from what its answers
  say, into its pace hash: one estimate per account, shared by every worker on every machine,
  read by pace-acquire (field interval) and resumed after a restart. A configured rate is learned
  the same way with itself as the ceiling and nothing announced, so an upstream that refuses it
  (429s) is followed below it, and the account climbs back to exactly the configured rate.
  - Announced: the answer carried a limit (RateLimit-Policy / X-RateLimit-Limit). Adopted at once:
    its window is the policy's `w=`, else inferred from how far the resets reach (within 2 s: per
    second, once 2 s of answers agree; within a minute: per minute; else per hour), paced with the
    jitter allowance exactly as a configured rate.
  - Learned (nothing announced): slow start (x2 every second while the rate in force is used; a
    refusal of a slot sent before the last doubling steps down from the rate before it), a 429
    cuts it at most once a second (every 200 ms while five or more are refused; none in the
    second after a step, whose refusals are the old rate's), by the share refused since the last
    step (0.5x to 0.9x), and remembers where it hit; it climbs back to just under
    that (a climb or probe refused goes back to the rate before it, which held); 30 s after the
    last 429 it probes (+3 %, then doubling steps every 4 s while no 429
    comes), so a plan upgrade is followed and a settled rate draws about two 429s a minute.
    KEYS[1] the account's pace hash (fields rate, source, interval, slow, changedAt, used, rej, r429,
            last429At, decreasedAt, doubledAt, probeAt, step, below and upAt (the rate before the
            last climb or probe, and when it was made), announced, windowMs, resetMax,
            resetSince; shares, and quotaWith:<account> = until (epoch ms), the pool's keys this
            key's quota looks shared with (queue/line.ts markSharedQuota): an announced limit
            is split evenly among them; early, earlyN: the slots taken before anything was heard, from which tat,
            the next free slot, is set when a limit is first announced, and earlyTat, the tat so
            set: pace-take.lua)
    ARGV[1] 'ok' | '429'; ARGV[2] announced limit ('' none); ARGV[3] announced window ms ('' none);
    ARGV[4] ms to the announced reset ('' none); ARGV[5] start rate /s; ARGV[6] ceiling /s ('' none);
    ARGV[7] jitter allowance ms; ARGV[8] 'auto' | 'cap' (a configured rate: it is the ceiling, and
    the estimate holds an interval only while it is below it); ARGV[9] the allowance's least share
    of the window (src/accounts/account.ts jitterAllowanceMs: a per-minute window gets more room);
    ARGV[10] what the answer said is left before its reset (X-RateLimit-Remaining; '' none)
    ARGV[11] a 429's request: the start of the slot it was sent in ('' unknown): a request paced
    before the last step down was refused at the rate that step answered, and steps no further
    ARGV[12] now, epoch ms: only a test that owns time passes it (production: absent, Redis TIME)
  A different ceiling than the stored one (the configuration changed) starts the estimate afresh.
  Returns {rate /s, source 'start'|'learned'|'announced', window ms ('' unknown), 1 when it changed}.
]]
--- @include "pace-take"
-- Slow start doubles the rate every second while it is used: from 1/s a 20/s key is reached in
-- 5 s, where every 2 s took 10 and, with the slots of the old rate still ahead, 12-14 (a cold
-- key without headers used 0.79 of its first minute, issue 43). The first 429 cuts by the share
-- refused, so the overshoot costs one step, as before. After a 429, the climb back and the probes
-- look every 2 s.
local SLOW_START = 2
local SLOW_START_MS = 1000
local CLIMB_MS = 2000
-- How long after a step down refusals are still the old rate's: a per-second window's length.
local OLD_RATE_MS = 1000
local now = math.floor(paceNow(ARGV[12]))
local f = redis.call('HMGET', KEYS[1], 'rate', 'source', 'slow', 'changedAt', 'used', 'r429', 'last429At', 'decreasedAt', 'probeAt', 'step',
  'announced', 'windowMs', 'resetMax', 'resetSince', 'ceiling', 'early', 'earlyN', 'earlyTat', 'doubledAt', 'below', 'upAt', 'shares')
local startRate = tonumber(ARGV[5])
local ceiling = tonumber(ARGV[6])
local jitter = tonumber(ARGV[7])
local capped = ARGV[8] == 'cap'
if (f[15] or '') ~= ARGV[6] then
  redis.call('HDEL', KEYS[1], 'rate', 'source', 'interval', 'slow', 'changedAt', 'used', 'rej', 'r429', 'decreasedAt', 'probeAt', 'step', 'announced', 'windowMs',
    'resetMax', 'resetSince', 'early', 'earlyN', 'earlyTat', 'doubledAt', 'below', 'upAt')
  redis.call('HSET', KEYS[1], 'ceiling', ARGV[6])
  f = {}
end
local rate = tonumber(f[1] or '') or startRate
local source = f[2] or 'start'
-- In slow start: from the first answer until the first 429.
local slow = f[3] ~= '0'

local function cap(r)
  if ceiling and r > ceiling then r = ceiling end
  if r < 0.01 then r = 0.01 end
  return r
end

-- The slots an `auto` account took at its start rate before it heard anything (pace-take's list
-- early) count against the limit now known: the next slot is set by earlyBound, and the list stays
-- (earlyTat) so that one of them given up before it was sent gives its interval back (pace-take).
-- Without it a 12/min key's two or three requests at 1/s were followed by twelve more at 5 s in
-- the same minute, and only a hold on `Remaining: 0` kept the 13th from a 429 (issue 21).
local function spaceAfterEarly(interval)
  if not f[16] or f[18] then return end
  -- Every slot taken so far is in the list, so this is the next free slot, whether the limit heard
  -- is slower than the start rate (later) or faster (sooner).
  local bound = tostring(earlyBound(f[16], tonumber(f[17] or '0'), interval))
  redis.call('HSET', KEYS[1], 'tat', bound, 'earlyTat', bound)
end

-- This key and the keys its quota looks shared with now (fields quotaWith:<account>, the epoch ms
-- until which it looks so: queue/line.ts markSharedQuota).
local function quotaShares(at)
  local n = 1
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 10) == 'quotaWith:' and (tonumber(all[i + 1]) or 0) > at then n = n + 1 end
  end
  return n
end

local function learned(r, fields)
  redis.call('HDEL', KEYS[1], 'early', 'earlyN', 'earlyTat')
  r = cap(r)
  if capped and r >= ceiling * 0.999 then
    -- Back at the configured rate: paced exactly by it again (no interval of the estimate's own).
    redis.call('HDEL', KEYS[1], 'interval')
    redis.call('HSET', KEYS[1], 'rate', tostring(r), 'source', 'start', 'changedAt', tostring(now), 'used', '0', 'rej', '0', unpack(fields))
    return {tostring(r), 'start', '', 1}
  end
  redis.call('HSET', KEYS[1], 'rate', tostring(r), 'source', 'learned', 'interval', tostring(1000 / r), 'changedAt', tostring(now), 'used', '0', 'rej', '0', unpack(fields))
  return {tostring(r), 'learned', '', 1}
end

-- Announced: adopt at once.
if ARGV[2] ~= '' then
  local limit = tonumber(ARGV[2])
  local windowMs = tonumber(ARGV[3])
  local provisional = false
  if not windowMs then
    local resetMax = tonumber(f[13] or '0')
    local since = tonumber(f[14] or '')
    if f[11] ~= ARGV[2] or not since then
      resetMax = 0
      since = now
    end
    local delta = tonumber(ARGV[4])
    -- A reset hours away is a used-up quota, not this window.
    if delta and delta >= 0 and delta <= 3700000 then resetMax = math.max(resetMax, delta) end
    redis.call('HSET', KEYS[1], 'resetMax', tostring(resetMax), 'resetSince', tostring(since))
    if resetMax <= 2000 and now - since >= 2000 then
      windowMs = 1000
    elseif resetMax <= 61000 then
      windowMs = 60000
      provisional = resetMax <= 2000 and delta
    else
      windowMs = 3600000
    end
  end
  local r = limit * 1000 / windowMs
  local interval = (windowMs + math.max(jitter, windowMs * tonumber(ARGV[9]))) / limit
  -- Every reset so far within 2 s, but not yet for 2 s: a per-second window most likely, not proven.
  -- What the upstream says is left may be spent before its reset whatever the window is, so it is
  -- spread evenly until then, no faster than the per-second reading: a per-second key does not
  -- idle at the per-minute pace for its first seconds (a cold start's 4 s, issue 43), and a
  -- per-minute key whose minute ends now spends only what its minute has left.
  local left = tonumber(ARGV[10])
  if provisional and left and left > 0 then
    local perSecond = (1000 + math.max(jitter, 1000 * tonumber(ARGV[9]))) / limit
    interval = math.max(perSecond, math.min(interval, provisional / left))
    r = 1000 / interval
    -- Paced as a per-second key may be, a request's lateness is judged as one's (the window said
    -- goes to workers/flow.ts's allowance): read as a minute's, 150 ms late passed unnoticed, and
    -- a create 38 ms late at the end of first contact, followed by 29 on time, put 31 requests in
    -- one second of a 30/s key (a 429 in about one cold 300-plate run of twenty).
    windowMs = 1000
  end
  if ceiling and r > ceiling then
    r = ceiling
    interval = 1000 / ceiling
  end
  -- Keys of a pool that look like one quota upstream (queue/pool.ts) split its limit evenly: each
  -- paced at the whole of it, two such keys sent twice what the quota takes, and one of them drew
  -- half its requests refused for as long as the batch lasted (236 429s in 30 s).
  local shares = quotaShares(now)
  if shares > 1 then
    r = r / shares
    interval = interval * shares
  end
  local changed = 0
  if source ~= 'announced' or f[11] ~= ARGV[2] or f[12] ~= tostring(windowMs) or (f[22] or '1') ~= tostring(shares) then changed = 1 end
  redis.call('HSET', KEYS[1], 'rate', tostring(r), 'source', 'announced', 'interval', tostring(interval), 'announced', ARGV[2], 'windowMs', tostring(windowMs), 'shares', tostring(shares))
  spaceAfterEarly(interval)
  return {tostring(r), 'announced', tostring(windowMs), changed}
end

if ARGV[1] == '429' then
  redis.call('HSET', KEYS[1], 'last429At', tostring(now))
  -- An announced limit is the upstream's word: a stray 429 is left to the hold.
  if source == 'announced' then return {tostring(rate), source, f[12] or '', 0} end
  -- Slots are taken ahead (up to the horizon) and answered later: after a step down, requests paced
  -- at the rate before it are still refused for a while. Each such refusal stepping down again cut
  -- a 32/s slow-start overshoot of a 20/s key to 7.2/s in 700 ms, and the rate remembered as where
  -- it hit (14.4) held the key at 0.7 of its limit until the probe 30 s later (issue 43's cold
  -- no-headers figure, found on the virtual clock of test/integration/pace-clock.test.ts).
  local slotAt = tonumber(ARGV[11] or '')
  local steppedAt = tonumber(f[8] or '')
  if slotAt and steppedAt and slotAt < steppedAt then return {tostring(rate), source, '', 0} end
  -- A climb or probe refused: the rate before it held, so the step is back to it, and the rate
  -- refused is where it hit. Stepping 0.9x from the refused rate instead put a told 40/s key on a
  -- 20/s one at 18.1-18.7/s for 2 s after each climb and probe (about three requests each).
  local below = tonumber(f[20] or '')
  local upAt = tonumber(f[21] or '')
  if below and upAt and below < rate and upAt >= (steppedAt or 0) and not (slotAt and slotAt < upAt) then
    return learned(below, {'r429', tostring(rate), 'slow', '0', 'step', '0.03', 'probeAt', tostring(now), 'decreasedAt', tostring(now), 'below', '', 'upAt', ''})
  end
  local rejected = redis.call('HINCRBY', KEYS[1], 'rej', 1)
  -- For a second after a step, the upstream's window still holds what the rate before it sent:
  -- its refusals count toward the next step's share but take no step of their own (each taking
  -- one cut a 40/s rate on a 20/s key to 14/s, and the climb back stopped under where it hit).
  if slotAt and steppedAt and slotAt < steppedAt + OLD_RATE_MS then return {tostring(rate), source, '', 0} end
  -- Once a second, or sooner when refusals pile up (a rate far too high must not run a whole second).
  local since = now - tonumber(f[8] or '0')
  if since < 1000 and not (since >= 200 and rejected >= 5) then return {tostring(rate), source, '', 0} end
  -- Step down by what the upstream refused since the last step (a rate twice too high sees half
  -- its requests refused), between 0.5x and 0.9x: far above the limit it takes two steps, not ten.
  local used = tonumber(f[5] or '0')
  local factor = 0.9
  if used >= 5 then factor = math.max(0.5, math.min(0.9, (used - rejected) / used * 0.97)) end
  -- In slow start a window's refusals are heard after the next doubling: one paced before it says
  -- the rate before it was already too high, so the step is from that rate (a 50/s key went 64,
  -- 128, then three steps and 119 429s down, on the virtual clock).
  local from = rate
  local doubledAt = tonumber(f[19] or '')
  if slow and slotAt and doubledAt and slotAt < doubledAt then from = rate / SLOW_START end
  return learned(from * factor, {'r429', tostring(from), 'slow', '0', 'step', '0.03', 'probeAt', tostring(now), 'decreasedAt', tostring(now)})
end

if source == 'announced' then return {tostring(rate), source, f[12] or '', 0} end
local changedAt = tonumber(f[4] or '')
if not changedAt then
  redis.call('HSET', KEYS[1], 'rate', tostring(cap(rate)), 'source', 'start', 'slow', '1', 'changedAt', tostring(now), 'used', '0')
  if not capped then redis.call('HSET', KEYS[1], 'interval', tostring(1000 / cap(rate))) end
  redis.call('HDEL', KEYS[1], 'early', 'earlyN', 'earlyTat')
  return {tostring(cap(rate)), 'start', '', 1}
end
local elapsed = now - changedAt
if elapsed < (slow and SLOW_START_MS or CLIMB_MS) then return {tostring(rate), source, '', 0} end
-- Only a rate that was used says anything about the limit; a slot short is still used (at 1/s a
-- second holds one slot or none, as the slots fall).
if tonumber(f[5] or '0') + 1 < 0.7 * rate * elapsed / 1000 then
  redis.call('HSET', KEYS[1], 'changedAt', tostring(now), 'used', '0', 'rej', '0')
  return {tostring(rate), source, '', 0}
end
if slow then
  -- The next slot was set at the old interval: the doubled rate takes it one new interval after
  -- the last slot, or the first half of each step went at the old rate and read as unused.
  local faster = cap(rate * SLOW_START)
  local tat = tonumber(redis.call('HGET', KEYS[1], 'tat') or '')
  if not capped and faster > rate and tat and tat > now then
    redis.call('HSET', KEYS[1], 'tat', string.format('%.3f', math.max(now, tat - 1000 / rate + 1000 / faster)))
  end
  return learned(faster, {'doubledAt', tostring(now)})
end
local r429 = tonumber(f[6] or '')
-- (0.999: the stored rate is rounded to 14 digits, so "at the plateau" must not read as "below it".)
if r429 and rate < 0.97 * r429 * 0.999 then return learned(math.min(0.97 * r429, rate * 1.1), {'below', tostring(rate), 'upAt', tostring(now)}) end
local probeAt = tonumber(f[9] or '0')
local last429 = tonumber(f[7] or '0')
local step = tonumber(f[10] or '0.03')
local quiet = 30000
if probeAt > last429 + 1000 then quiet = 4000 end
if now - probeAt >= quiet then
  return learned(rate * (1 + step), {'probeAt', tostring(now), 'step', tostring(math.min(0.5, step * 2)), 'below', tostring(rate), 'upAt', tostring(now)})
end
redis.call('HSET', KEYS[1], 'changedAt', tostring(now), 'used', '0', 'rej', '0')
return {tostring(rate), source, '', 0}
