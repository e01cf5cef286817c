--[[
  The scheduler's pick, in one place (queue/scheduler.ts): classes in order; within a class, stride
  scheduling: the batch with the smallest pass gives one plate and its pass grows by 1/weight, so
  batches share the class by weight. A batch whose list is empty leaves its class. Every plate
  taken is staged (member '<class>:<batch>.<plate>', score: now) until its job exists, so a crash
  in between loses none. Included by sched-pick and sched-feed.
  Deadlines (docs/plans.md): `urgent` (urgentBatches below) lists the batches whose deadline needs
  them served now; they go after the interactive class and before the weights, earliest deadline
  first, their passes left as they were (they share by weight again once their slack is back).
  A pooled batch is listed with each other key of its pool as `<id>@<home>` (queue/scheduler.ts):
  its plates wait in one list, the home account's, which `template` (any account's pending prefix,
  its id written `{{home}}`) names; each key takes from it as it has room.
  takePlates(classKeys, weightsKey, stagedKey, pendingPrefix, now, n, classes, out, template, urgent)
    appends class index, batch id, plate for each plate taken to `out`; returns how many.
  urgentBatches(deadlinesKey, classKeys, pendingPrefix, now, msPerPlate, reserveMs)
    the batches to serve first now, earliest deadline first (see its comment).
]]
local function pendingKey(pendingPrefix, template, batch)
  local at = string.find(batch, '@', 1, true)
  if not at or not template or template == '' then return pendingPrefix .. batch end
  local s, e = string.find(template, '{{home}}', 1, true)
  return string.sub(template, 1, s - 1) .. string.sub(batch, at + 1) .. string.sub(template, e + 1)
    .. string.sub(batch, 1, at - 1)
end

--[[
  Walking the account's deadline batches earliest deadline first, the time the plates of each and
  of every earlier one need (msPerPlate each: a plate's requests at the rate in force) plus
  reserveMs (the last plate's answer and a margin), against its deadline. A batch that cannot make
  it even so (what it needs is more than one and a half times the time left: the figures are
  estimates, and a batch a little behind is still served) is left to the weights and needs no time
  of the others: serving it first would only make them late too (earliest deadline first while
  slack remains). When the slack of a batch in time falls under a quarter of what it needs (at
  least 5 s: the account's queue holds creates fed before, and polls go first), it and every batch
  before it go first.
  A batch held at its cap (in no class) is passed over.
]]
local function urgentBatches(deadlinesKey, classKeys, pendingPrefix, now, msPerPlate, reserveMs)
  local urgent = {}
  if not msPerPlate or msPerPlate <= 0 then return urgent end
  local list = redis.call('ZRANGE', deadlinesKey, 0, 49, 'WITHSCORES')
  local need, upto, inTime = reserveMs, 0, {}
  for i = 1, #list, 2 do
    local batch, due = list[i], tonumber(list[i + 1])
    local left = redis.call('LLEN', pendingPrefix .. batch)
    local listed = redis.call('ZSCORE', classKeys[2], batch) or redis.call('ZSCORE', classKeys[3], batch)
    if left > 0 and listed then
      local needed = need + left * msPerPlate
      local slack = due - now - needed
      if due - now >= needed / 1.5 then
        need = needed
        inTime[#inTime + 1] = batch
        if slack < math.max(5000, needed * 0.25) then upto = #inTime end
      end
    end
  end
  for i = 1, upto do urgent[i] = inTime[i] end
  return urgent
end

-- A plate taken: staged (until its job is on the queue: the feeder's recovery adds it again
-- should the process die first) and returned as class, batch, plate.
local function stage(stagedKey, now, c, batch, plate, out)
  redis.call('ZADD', stagedKey, now, c .. ':' .. batch .. '.' .. plate)
  out[#out + 1] = c
  out[#out + 1] = batch
  out[#out + 1] = plate
end

local function takeUrgent(classKeys, stagedKey, pendingPrefix, now, n, out, urgent, picked)
  for _, batch in ipairs(urgent) do
    local c = redis.call('ZSCORE', classKeys[2], batch) and 2 or 3
    while picked < n do
      local plate = redis.call('LPOP', pendingPrefix .. batch)
      if not plate then
        redis.call('ZREM', classKeys[c], batch)
        break
      end
      stage(stagedKey, now, c, batch, plate, out)
      picked = picked + 1
    end
  end
  return picked
end

local function takePlates(classKeys, weightsKey, stagedKey, pendingPrefix, now, n, classes, out, template, urgent)
  local picked = 0
  for c = 1, classes do
    if c == 2 and urgent then picked = takeUrgent(classKeys, stagedKey, pendingPrefix, now, n, out, urgent, picked) end
    while picked < n do
      local head = redis.call('ZRANGE', classKeys[c], 0, 0, 'WITHSCORES')
      if #head == 0 then break end
      local batch = head[1]
      local plate = redis.call('LPOP', pendingKey(pendingPrefix, template, batch))
      if not plate then
        redis.call('ZREM', classKeys[c], batch)
      else
        local weight = tonumber(redis.call('HGET', weightsKey, batch) or '1')
        redis.call('ZADD', classKeys[c], tonumber(head[2]) + 1 / weight, batch)
        stage(stagedKey, now, c, batch, plate, out)
        picked = picked + 1
      end
    end
  end
  return picked
end
