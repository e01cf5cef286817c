--[[
  Admits one create in one step (workers/flow.ts, through queue/admission.ts): the pace, the
  in-flight cap and the spending caps, each by its owner's rule (includes/inflight-take,
  pace-take, budget-take; the same rules as inflight-acquire, pace-acquire and budget-reserve).
  Nothing is taken unless all three say yes, so a create refused by a cap wastes no pacing slot
  and a create that waits for its slot holds no in-flight slot meanwhile. One script where three
  ran: about 6 Redis commands less a create (issue 21).
    KEYS[1] the account's pace hash (queue/line.ts)
    KEYS[2] the account's in-flight zset; KEYS[3] its slots per batch (queue/inflight.ts)
    KEYS[4] the batch's budget hash; KEYS[5] the account's day counter; KEYS[6] its month counter;
    KEYS[7] the account's budget hash, run-time caps (queue/budget.ts)
    KEYS[8] the batch's outcomes hash (queue/batch/: the plate is finished already when it holds one)
    ARGV[1] pacing interval, ms; ARGV[2] horizon, ms; ARGV[3] 'auto' | 'cap' ('!' after it: an interactive request, includes/pace-take paceClaim); ARGV[4] retake: '0' here
    ARGV[5] job id; ARGV[6] batch id; ARGV[7] in-flight cap; ARGV[8] now (epoch ms, the slot's
    score); ARGV[9] job key prefix
    ARGV[10] configured day cap, ARGV[11] configured month cap (-1 = none); ARGV[12] day TTL s;
    ARGV[13] month TTL s; ARGV[14] the plate
    ARGV[15] the pace's now, epoch ms: only a test that owns time passes it (production: absent,
    Redis TIME)
  Returns {1, wait ms, reason, the slot's start, the announced window ms or '', '1' for an early
  slot or '', the next slot's wait ms or ''} admitted (sleep `wait`, then send; the start names
  the slot if the request gives it up: pace-acquire's retake; the window is what its lateness is
  measured against; the next slot's wait, when the process's next request asks); {0, wait ms, 'pace'|'hold'}
  the slot is further than the horizon; {-1, 0, 'inflight'} the in-flight cap is reached;
  {-2, 0, 'batch'|'day'|'month'} a spending cap is reached; {-3, 0, 'finished'} the plate has its
  outcome already (a batch resumed, a job added again, a crash after the outcome was stored): its
  in-flight slot, if it held one, is given back and nothing is sent. This is the look a job at
  step `create` made with an HEXISTS of its own before (issue 21: a round trip a plate).
]]
--- @include "inflight-take"
--- @include "inflight-release"
--- @include "pace-take"
--- @include "budget-take"
-- The pace is looked at first only because it is the cheapest to read: a slot beyond the horizon
-- answers at once (the usual reply to a request that asks early), and nothing is taken before
-- the cap and the caps said yes.
local next = paceNext(KEYS[1], tonumber(ARGV[1]), ARGV[3], ARGV[4], ARGV[15])
-- An interactive request's claim on the next slot: a less urgent one waits for it (pace-take).
local yieldMs = paceClaim(KEYS[1], next, tonumber(ARGV[2]))
if yieldMs then return {0, tostring(math.max(next.wait, yieldMs)), 'pace'} end
if next.wait > tonumber(ARGV[2]) then return {0, tostring(next.wait), next.reason} end
if redis.call('HEXISTS', KEYS[8], ARGV[14]) == 1 then
  releaseInflight(KEYS[2], KEYS[3], ARGV[5], ARGV[6])
  return {-3, '0', 'finished'}
end
local room = inflightRoom(KEYS[2], KEYS[3], ARGV[5], tonumber(ARGV[7]), ARGV[9])
if room == 'full' then return {-1, '0', 'inflight'} end
local capped = budgetCapped(KEYS[4], KEYS[5], KEYS[6], KEYS[7], tonumber(ARGV[10]), tonumber(ARGV[11]))
if capped then return {-2, '0', capped} end
if room == 'room' then inflightTake(KEYS[2], KEYS[3], ARGV[5], ARGV[6], ARGV[8]) end
paceTake(KEYS[1], next, ARGV[4])
budgetTake(KEYS[4], KEYS[5], KEYS[6], ARGV[12], ARGV[13])
return {1, tostring(next.wait), next.reason, paceStart(next), next.windowMs, paceEarly(next), paceFollows(next)}
