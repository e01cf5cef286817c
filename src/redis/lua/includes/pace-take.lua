--[[
  The pace's rule, in one place (queue/line.ts): the account's next request slot on Redis's
  clock. Slots are spaced by the pacing interval, so every worker on every machine shares one
  schedule; a hold (429, quota) moves the next slot to its end. The learned estimate in the same
  hash (pace-learn) gives the interval of an `auto` account, and, for a configured rate the
  upstream refused with 429s, a longer one than configured until it climbs back; the slots taken
  are counted so the learner knows whether the rate in force was used.
  An `auto` account that has heard nothing yet (no interval in the hash) goes at its start rate,
  but no faster than one request every EARLY_GAP_MS, and lists those slots' starts (field early:
  the first and the last EARLY_KEPT - 1, earlyN all of them), so the limit it then hears is
  applied to them too (pace-learn): a slow key's first answers must not be followed by a whole
  window at the announced rate on top of them. The gap lets the first answer come back before a
  second slot is taken. The list stays while the next slot is the one it set (earlyTat): a slot
  taken early and given up after the limit was heard (a worker woken late) was never sent, so it
  leaves the list and the next slot comes back by what it had cost (a whole interval on a slow key).
  Included by pace-acquire, create-admit, pace-held and job-fence.
  paceHeldFor(paceKey, at) → ms left of the account's hold (its `hold` field; 0: none), at `at`
    as paceNext reads it.
  paceNext(paceKey, interval, mode, retake, at) → the slot's start, its wait from now (ms),
    'pace'|'hold', and what paceTake needs; mode 'auto' (the learned interval) | 'cap' (never
    faster than configured), with a trailing '!' for an interactive request (paceClaim); retake
    as for paceTake; `at`: now, epoch ms, for a test that owns time ('' or nil in production:
    Redis TIME, the one clock every machine shares; test/unit/pace-clock.test.ts holds that).
  paceClaim(paceKey, next, horizon) → nil when this request may take the slot next, else the ms
    it is to wait: an interactive request's claim on the next slot (see its comment).
  earlyBound(list, n, interval) → the first slot a limit of that interval allows after the early
    slots (pace-learn, when it first hears a limit).
  paceTake(paceKey, next, retake) reserves it; retake '0', or the start of a slot the request gave
    up (a hold came, or it woke too late): this one is not counted as used again, and it replaces
    that one in the early list (a slot given up was never sent).
  paceStart(next) is the slot's start as the early list writes it: callers return it, and a
  request that gives its slot up names it as `retake`. paceEarly(next) is '1' for a slot taken
  before any limit was heard (callers return it: such a request is not given up for lateness, the
  next early slot being 1.5 s away; its write moves its start in the list, pace-shift). next.windowMs is the window of the limit
  the upstream announced ('' none heard): callers return it with a reserved slot, so a process
  that has not had an answer of the account yet still measures a request's lateness against the
  window in force (a per-minute key allows 150 ms, not the 12.5 ms of the start rate's second).
  paceFollows(next) is how far from now the next slot is at the soonest ('' after an early slot):
  callers return it with a reserved slot, so the process's next request does not ask in vain.
]]
local EARLY_KEPT = 32
local EARLY_GAP_MS = 1500

-- The list without the slot `at` (nil when it was the only one), its count, and whether it was there.
local function earlyWithout(list, n, at)
  local kept = {}
  local found = false
  for s in string.gmatch(list, '[^,]+') do
    if not found and s == at then found = true else kept[#kept + 1] = s end
  end
  if not found then return list, n, false end
  if #kept == 0 then return nil, 0, true end
  return table.concat(kept, ','), n - 1, true
end

-- Slot j of the n early ones (the list holds slot 0 and the newest k - 1) is followed by the next
-- no sooner than (n - j) intervals later, so any limit + 1 requests in a row span the window.
local function earlyBound(list, n, interval)
  local starts = {}
  for s in string.gmatch(list, '[^,]+') do starts[#starts + 1] = tonumber(s) end
  local k = #starts
  local bound = starts[1] + n * interval
  for i = 2, k do bound = math.max(bound, starts[i] + (k - i + 1) * interval) end
  return bound
end

-- Now, epoch ms: `at` when a test owns time, else Redis's clock.
local function paceNow(at)
  if at ~= nil and at ~= '' then return tonumber(at) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- A hold past the sane maximum (queue/line.ts holdMs, 32 days) was not written by a checked hold:
-- garbage (1e+300) is no hold, not a wait past the end of time.
local function saneHold(raw, now)
  local hold = tonumber(raw or '0')
  if hold == nil or hold > now + 2764800000 then return 0 end
  return hold
end

-- Ms left of the account's hold (the pace hash's `hold` field, epoch ms) at `at` (else Redis TIME).
local function paceHeldFor(paceKey, at)
  local now = paceNow(at)
  local hold = saneHold(redis.call('HGET', paceKey, 'hold'), now)
  if hold <= now then return 0 end
  return math.ceil(hold - now)
end

local function paceNext(paceKey, interval, mode, retake, at)
  local urgent = string.sub(mode, -1) == '!'
  if urgent then mode = string.sub(mode, 1, -2) end
  local now = paceNow(at)
  local f = redis.call('HMGET', paceKey, 'tat', 'hold', 'interval', 'used', 'early', 'earlyN', 'earlyTat', 'windowMs')
  local early = false
  if f[3] then
    if mode == 'auto' then interval = tonumber(f[3]) else interval = math.max(interval, tonumber(f[3])) end
    if f[5] then
      if f[1] ~= f[7] then
        -- A slot was taken after the limit was heard: the early slots have done their part.
        redis.call('HDEL', paceKey, 'early', 'earlyN', 'earlyTat')
      elseif retake ~= '0' then
        local list, n, found = earlyWithout(f[5], tonumber(f[6] or '0'), retake)
        if found and list then
          local bound = tostring(earlyBound(list, n, interval))
          redis.call('HSET', paceKey, 'tat', bound, 'early', list, 'earlyN', tostring(n), 'earlyTat', bound)
          f[1] = bound
        elseif found then
          redis.call('HDEL', paceKey, 'early', 'earlyN', 'earlyTat')
          redis.call('HSET', paceKey, 'tat', '0')
          f[1] = '0'
        end
      end
    end
  elseif mode == 'auto' then
    early = true
  end
  local start = math.max(tonumber(f[1] or '0'), now)
  local reason = 'pace'
  local hold = saneHold(f[2], now)
  if hold > start then
    start = hold
    reason = 'hold'
  end
  return { start = start, wait = start - now, reason = reason, interval = interval, used = tonumber(f[4] or '0'),
    early = early, earlyList = f[5], earlyN = tonumber(f[6] or '0'), windowMs = f[8] or '', urgent = urgent }
end

-- A slot is reserved by whoever asks first once it is within the horizon. On a slow key (12/min:
-- a slot every 5 s) the requests of every process ask for it as it comes near, and an interactive
-- one told "beyond the horizon" came back after the next slot was taken again: with four
-- processes it got one slot in four, 22-45 s after its submit (issue 37). So an interactive request
-- that finds the next free slot beyond the horizon claims it (field claim: until that slot's start
-- and one interval, so a claimer that never comes back holds nothing for long); until then every
-- less urgent request is told to wait, and the claimer reserves it when it asks again. Its reserving
-- a slot ends the claim.
local function paceClaim(paceKey, next, horizon)
  if next.urgent then
    if next.wait > horizon and next.reason == 'pace' then
      redis.call('HSET', paceKey, 'claim', string.format('%.3f', next.start + next.interval))
    else
      redis.call('HDEL', paceKey, 'claim')
    end
    return nil
  end
  local claim = tonumber(redis.call('HGET', paceKey, 'claim') or '0')
  local now = next.start - next.wait
  if claim > now then return claim - now end
  return nil
end

local function paceStart(next)
  return string.format('%.3f', next.start)
end

local function paceEarly(next)
  if next.early then return '1' end
  return ''
end

-- How far from now the slot after this one is, at the soonest (ms, as text): callers return it
-- with a reserved slot, so the process's next request asks no sooner than that slot is near
-- (another process may take it first, never sooner). An early slot's follower says nothing ('').
local function paceFollows(next)
  if next.early then return '' end
  return string.format('%.3f', next.wait + next.interval)
end

local function paceTake(paceKey, next, retake)
  local step = next.interval
  if next.early then step = math.max(step, EARLY_GAP_MS) end
  local fields = { 'tat', tostring(next.start + step) }
  if retake == '0' then
    fields[3] = 'used'
    fields[4] = tostring(next.used + 1)
  end
  if next.early then
    local list = next.earlyList
    local n = next.earlyN
    local at = paceStart(next)
    -- The slot given up goes; this one takes its place (and its count).
    if list and retake ~= '0' then list, n = earlyWithout(list, n, retake) end
    if not list then
      list = at
    else
      -- Keep the first start and the newest ones (earlyBound spaces what follows from both ends).
      if n >= EARLY_KEPT then list = string.gsub(list, '^([^,]+),[^,]+', '%1') end
      list = list .. ',' .. at
    end
    fields[#fields + 1] = 'early'
    fields[#fields + 1] = list
    fields[#fields + 1] = 'earlyN'
    fields[#fields + 1] = tostring(n + 1)
  end
  redis.call('HSET', paceKey, unpack(fields))
end
