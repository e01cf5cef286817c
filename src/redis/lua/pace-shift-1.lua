--[[
  Moves the account's schedule back after a request left later than its allowance (queue/line.ts
  `shift`): the time to open a connection (TCP, TLS) or an event loop stalled between the pacing's
  last look and the write. The request N slots after it must not reach a sliding window less than
  the window after it, so every slot not yet taken moves back by the excess. Slots already taken
  (at most a horizon ahead, less than a window) keep their times. Requests late together (each
  opening a connection at a process's start) move it once by the largest excess, not by the sum:
  a slot taken before the last move had its successors moved by it already.
    KEYS[1] the account's pace hash: tat (next free slot, ms), interval (learned, ms), earlyTat
            (the tat the early slots of an `auto` account set: moved with it, includes/pace-take.lua),
            lateFrom and lateBy (the tat before the last move, and how far it moved), early (the
            slots taken before a limit was heard: the late one's start moves to when it left)
    ARGV[1] the late request's slot start (epoch ms), or '' when it is not known
    ARGV[2] ms it left later than its allowance
    ARGV[3] pacing interval, ms: the configured one, or the start of `auto`
    ARGV[4] 'auto' (the learned interval in force) | 'cap' (never faster than configured)
  Returns the ms the schedule moved (0: a move for an earlier late request covered it).
]]
local f = redis.call('HMGET', KEYS[1], 'tat', 'interval', 'earlyTat', 'lateFrom', 'lateBy', 'early')
local interval = tonumber(ARGV[3])
if f[2] then
  if ARGV[4] == 'auto' then interval = tonumber(f[2]) else interval = math.max(interval, tonumber(f[2])) end
end
local tat = tonumber(f[1] or '0')
local at = tonumber(ARGV[1])
local late = tonumber(ARGV[2])
-- A slot taken before any limit was heard: the list of those slots (pace-take.lua) spaces what
-- follows once a limit is heard, so it records when this one actually left.
if f[6] and not f[3] and at then
  local kept = {}
  for s in string.gmatch(f[6], '[^,]+') do
    if s == ARGV[1] then kept[#kept + 1] = string.format('%.3f', at + late) else kept[#kept + 1] = s end
  end
  redis.call('HSET', KEYS[1], 'early', table.concat(kept, ','))
end
local by = late
local lateFrom = tat
if at and f[4] and at < tonumber(f[4]) then
  -- Its successors were moved by lateBy already.
  by = late - tonumber(f[5])
  if by <= 0 then return '0' end
  lateFrom = tonumber(f[4])
  late = tonumber(f[5]) + by
elseif at then
  -- An account idle since the late slot has a tat in the past: its next slot would be "now", too
  -- early for the slot N after the late one; the slot after the late one is the floor.
  tat = math.max(tat, at + interval)
  lateFrom = tat
end
local moved = tostring(tat + by)
local fields = { 'tat', moved, 'lateFrom', tostring(lateFrom), 'lateBy', tostring(late) }
if f[3] and f[3] == f[1] then
  fields[#fields + 1] = 'earlyTat'
  fields[#fields + 1] = moved
end
redis.call('HSET', KEYS[1], unpack(fields))
return tostring(by)
