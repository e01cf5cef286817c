--[[
  The scheduler's pick, in one place (queue/scheduler.ts): classes in order; within a class, stride
  scheduling: the batch with the smallest pass gives one plate and its pass grows by 1/weight, so
  batches share the class by weight. A batch whose list is empty leaves its class. Every plate
  taken is staged (member '<class>:<batch>.<plate>', score: now) until its job exists, so a crash
  in between loses none. Included by sched-pick and sched-feed.
  takePlates(classKeys, weightsKey, stagedKey, pendingPrefix, now, n, classes, out)
    appends class index, batch id, plate for each plate taken to `out`; returns how many.
]]
local function takePlates(classKeys, weightsKey, stagedKey, pendingPrefix, now, n, classes, out)
  local picked = 0
  for c = 1, classes do
    while picked < n do
      local head = redis.call('ZRANGE', classKeys[c], 0, 0, 'WITHSCORES')
      if #head == 0 then break end
      local batch = head[1]
      local plate = redis.call('LPOP', pendingPrefix .. batch)
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
