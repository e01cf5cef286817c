--[[
  Reserves the account's next request slot when it is near enough (queue/line.ts); the rule is
  includes/pace-take.lua, shared with create-admit.
    KEYS[1] the account's pace hash: tat (next free slot, ms), hold (no request before, ms),
            interval (learned, ms), used (slots since the learner last looked), claim (an
            interactive request's claim on the next slot, until ms), early, earlyN
            and earlyTat (an `auto` account's slots before it heard anything, and the tat they
            set once it did: includes/pace-take.lua)
    ARGV[1] pacing interval, ms (decimals allowed): the configured one, or the start of `auto`
    ARGV[2] horizon, ms: only a slot at most this far away is reserved
    ARGV[3] 'auto' (the learned interval in force) | 'cap' (a configured rate: never faster than it);
            '!' after it: an interactive request, which claims the next slot (includes/pace-take paceClaim)
    ARGV[4] '0', or the start of a slot the request gave up (a hold came, or it woke too late):
            the new slot is not counted as used again, or the learner would see fewer refusals
            than there were, and it takes the given-up one's place among the early slots
    ARGV[5] now, epoch ms: only a test that owns time passes it (production: absent, Redis TIME)
  Returns {reserved 1|0, wait ms, 'pace'|'hold', the slot's start, the announced window ms or '',
  '1' for an early slot or '', the next slot's wait ms or ''}: reserved → the caller sleeps
  `wait` and sends (and names the start if it gives the slot up), and the process's next request
  asks when the next slot is near; not reserved → nothing changed, the slot is `wait` away.
]]
--- @include "pace-take"
local next = paceNext(KEYS[1], tonumber(ARGV[1]), ARGV[3], ARGV[4], ARGV[5])
-- An interactive request's claim on the next slot: a less urgent one waits for it (pace-take).
local yieldMs = paceClaim(KEYS[1], next, tonumber(ARGV[2]))
if yieldMs then return {0, tostring(math.max(next.wait, yieldMs)), 'pace'} end
if next.wait > tonumber(ARGV[2]) then return {0, tostring(next.wait), next.reason} end
paceTake(KEYS[1], next, ARGV[4])
return {1, tostring(next.wait), next.reason, paceStart(next), next.windowMs, paceEarly(next), paceFollows(next)}
