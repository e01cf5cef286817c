--[[
  One feed of an account's queue (queue/scheduler.ts, for queue/feeder.ts), in one round trip:
  every interactive plate at once (a person waits; up to ARGV[1]), then creates of every class
  until the BullMQ queue holds ARGV[2] jobs waiting, and no more than the account's in-flight cap
  has room for (a create the cap refuses would only go round the queue again). When the account has nothing at all (no batch
  in a class, nothing staged, no job waiting, prioritized, delayed, active or paused) it leaves the
  active set, so no process feeds it or holds a Worker for it until work arrives again
  (sched-enlist and Scheduler.activate put it back): its flag is cleared here, and the caller takes
  it off the global list at the generation returned (sched-retire). The check and the clearing are
  one script, so an enlist can never fall between them.
    KEYS[1..3] the account's class zsets; KEYS[4] hash batch -> weight; KEYS[5] the staged zset;
    KEYS[6] the account's active flag (hash: on, gen);
    KEYS[7..11] the account's BullMQ queue: wait list, prioritized zset, delayed zset, active list,
    paused list; KEYS[12] the account's in-flight zset (queue/inflight.ts); KEYS[13] the
    account's line hash (queue/line.ts: its field ARGV[7] says until when creates are held at a
    spending cap; while they are, none is fed, interactive or not, since each would only sleep
    as a delayed job: the look a feed made with an HGET of its own before, issue 21);
    KEYS[14] the BullMQ queue's limiter key (its rate-limit switch: queue/line.ts stopTaking);
    KEYS[15] the account's deadlines zset (batch -> deadline, epoch ms)
    ARGV[1] interactive plates at most; ARGV[2] jobs the queue should hold waiting (0: no
    creates); ARGV[3] prefix of the pending lists; ARGV[4] now, epoch ms; ARGV[5] the pending
    prefix of any account, its id written `{{home}}` (where a lent pooled batch's plates wait:
    includes/sched-take.lua); ARGV[6] the in-flight cap; ARGV[7] the line's field: creates held
    until (epoch ms); ARGV[8] ms a plate takes at the rate in force (0: deadlines not weighed);
    ARGV[9] ms kept in reserve before a deadline (the last answer's time and a margin); ARGV[10]
    1: interactive plates too only within the in-flight cap's room (an account that meets its
    upstream sends one create at a time, and a plate fed beyond it would go round the queue);
    ARGV[11] the limiter's `max` (src/engine/bullmq/keys.ts RATE_LIMIT_SWITCH): the switch is on
    only while the key's count is at it (BullMQ's getRateLimitTTL); the key itself lives a second
    after any job was taken, and read as the switch it deferred every wake by up to that second
    (a 10/s key whose jobs waited as polls in the Worker created 5 a second, issue 43);
    ARGV[12] a normal batch just submitted ('' none: its producer's feed names it): when this
    call took none of its plates, one is taken beyond the target, within the cap's room
  Returns {1 when the account has nothing (its flag is off, by this call or by another
  process's), else 0; when idle the flag's generation, else how many jobs the queue holds
  waiting (wait + prioritized, this call's picks included); the ms left of the queue's rate-limit
  switch (0: off); K; then class index, batch id, plate, ...; then K pairs: a normal batch this
  call picked from and how many of its plates still wait in its list (the feeder's closing
  creates weigh it: an LLEN a batch they made in a round trip of their own); last, how many other
  normal batches have plates waiting}. A process whose
  Worker waits wakes it when jobs wait, or when the switch goes off if it is on
  (workers/doorbell.ts).
]]
--- @include "sched-take"
local classes = {KEYS[1], KEYS[2], KEYS[3]}
local now = ARGV[4]
local out = {0, 0, 0, 0}
local interactive, target = tonumber(ARGV[1]), tonumber(ARGV[2])
if (tonumber(redis.call('HGET', KEYS[13], ARGV[7]) or '0') or 0) > tonumber(now) then
  interactive, target = 0, 0
end
local queued = redis.call('LLEN', KEYS[7]) + redis.call('ZCARD', KEYS[8])
local inflight = redis.call('ZCARD', KEYS[12])
if ARGV[10] == '1' then interactive = math.max(0, math.min(interactive, tonumber(ARGV[6]) - inflight - queued)) end
local picked = takePlates(classes, KEYS[4], KEYS[5], ARGV[3], now, interactive, 1, out, ARGV[5])
local room = tonumber(ARGV[6]) - inflight - queued - picked
local want = math.min(target - queued - picked, room)
-- Deadline batches whose slack runs out go first (after the interactive ones): sched-take.
local urgent = urgentBatches(KEYS[15], classes, ARGV[3], tonumber(now), tonumber(ARGV[8]), tonumber(ARGV[9]))
picked = picked + takePlates(classes, KEYS[4], KEYS[5], ARGV[3], now, want, 3, out, ARGV[5], urgent)
-- A batch just submitted gets one plate on the queue now, whatever the queue holds: while an
-- earlier batch's polls come due together the queue holds its target in them, and no create is
-- fed until they are sent (a 1-plate batch beside a 5,000-plate one: 9 s from submit to create).
-- Its job goes before the creates queued (queue/feeder.ts freshPriority).
local fresh = ARGV[12]
if fresh and fresh ~= '' and target > 0 and redis.call('ZSCORE', KEYS[2], fresh) then
  local took = false
  for i = 6, #out, 3 do
    if out[i] == fresh then took = true end
  end
  if not took and tonumber(ARGV[6]) - inflight - queued - picked > 0 then
    picked = picked + takeUrgent(classes, KEYS[5], ARGV[3], now, 1, out, {fresh}, 0)
  end
end
out[2] = queued + picked
-- What each normal batch picked from still has waiting (its list, after this call's picks).
local seen = {}
for i = 5, #out, 3 do
  if out[i] == 2 then seen[out[i + 1]] = true end
end
for batch in pairs(seen) do
  out[#out + 1] = batch
  out[#out + 1] = redis.call('LLEN', pendingKey(ARGV[3], ARGV[5], batch))
  out[4] = out[4] + 1
end
-- The normal batches with plates waiting that this call did not pick from (one emptied since,
-- and not yet taken off its class, counts too): the feeder closes batches only when none does.
local others = redis.call('ZCARD', KEYS[2])
for batch in pairs(seen) do
  if redis.call('ZSCORE', KEYS[2], batch) then others = others - 1 end
end
out[#out + 1] = others
if out[2] > 0 and (tonumber(redis.call('GET', KEYS[14]) or '0') or 0) >= tonumber(ARGV[11]) then
  out[3] = math.max(0, redis.call('PTTL', KEYS[14]))
end
if picked > 0 or queued > 0 then return out end
if redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3]) > 0 then return out end
if redis.call('ZCARD', KEYS[5]) + redis.call('ZCARD', KEYS[9]) > 0 then return out end
if redis.call('LLEN', KEYS[10]) + redis.call('LLEN', KEYS[11]) > 0 then return out end
-- Idle whoever's call removed it: a second process feeding the same account at the same moment
-- (two processes start, both look at every account) must not take it for busy and start a Worker.
redis.call('HDEL', KEYS[6], 'on')
out[1] = 1
out[2] = tonumber(redis.call('HGET', KEYS[6], 'gen') or '0')
return out
