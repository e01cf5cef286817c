--[[
  The scheduler's pick, in one place (queue/scheduler.ts): classes in order; within a class, stride
  scheduling: the batch with the smallest pass gives one plate and its pass grows by 1/weight, so
  batches share the class by weight. A batch whose list is empty leaves its class. Every plate
  taken is staged (member '<class>:<batch>.<plate>', score: now) until its job exists, so a crash
  in between loses none. Included by sched-pick and sched-feed.
  A pooled batch is listed with each other key of its pool as `<id>@<home>` (queue/scheduler.ts):
  its plates wait in one list, the home account's, which `template` (any account's pending prefix,
  its id written `{{home}}`) names; each key takes from it as it has room.
  takePlates(classKeys, weightsKey, stagedKey, pendingPrefix, now, n, classes, out, template)
    appends class index, batch id, plate for each plate taken to `out`; returns how many.
]]
local function pendingKey(pendingPrefix, template, batch)
  local at = string.find(batch, '@', 1, true)
  if not at or not template or template == '' then return pendingPrefix .. batch end
  local s, e = string.find(template, '{{home}}', 1, true)
  return string.sub(template, 1, s - 1) .. string.sub(batch, at + 1) .. string.sub(template, e + 1)
    .. string.sub(batch, 1, at - 1)
end

local function takePlates(classKeys, weightsKey, stagedKey, pendingPrefix, now, n, classes, out, template)
  local picked = 0
  for c = 1, classes do
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
        redis.call('ZADD', stagedKey, now, c .. ':' .. batch .. '.' .. plate)
        out[#out + 1] = c
        out[#out + 1] = batch
        out[#out + 1] = plate
        picked = picked + 1
      end
    end
  end
  return picked
end
