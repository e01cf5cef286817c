--[[
  First-poll samples for the shared poll schedule (queue/poll-schedule.ts), in the order they were
  taken: each moves the stored log(first-poll delay / initial) by its step unless it was taken too
  far from the estimate in force to say anything about it. A process sends what it gathered at
  most every half second (one call, not one a plate: issue 21).
  The first samples move it further (a gain from ARGV[7] down to 1 over the first ARGV[8] samples):
  an estimate that starts at the slow end must settle within a few dozen answers, not hundreds
  (issue 43). Answers whose time the upstream stated (kind '3') are kept, the last ARGV[9] of
  them, and once there are ARGV[10] the estimate is their ARGV[6]-quantile: measured, not learned.
    KEYS[1] the product's learner hash (logOffset, pending, finished counters)
    KEYS[2] the product's list of answer times the upstream stated (log(took / initial))
    ARGV[1] step of a pending sample; ARGV[2] step of a finished one; ARGV[3] lowest, ARGV[4]
    highest offset; ARGV[5] relevance R; ARGV[6] the quantile q; ARGV[7] the first sample's gain;
    ARGV[8] samples over which the gain falls to 1; ARGV[9] answer times kept; ARGV[10] answer
    times needed before their quantile is the estimate; then per sample: log(ms / initial) and
    its kind: '1' pending at that time, '0' finished by that time, '2' finished, having taken
    exactly that time (the upstream said so): a sample at the estimate in force whenever it was
    taken (finished if it took no longer, else as a pending one), so it always counts; '3' an
    answer time the upstream stated, from any poll (not a first-poll sample: kept, not counted).
  Returns the offset now in force (a string) and the first-poll samples counted so far, all
  processes' (pending + finished: what PollLearner.learnedDelay reads).
]]
local v = tonumber(redis.call('HGET', KEYS[1], 'logOffset') or '0')
local lo, hi, r = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local q, gain0, gainOver = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local keep, needed = tonumber(ARGV[9]), tonumber(ARGV[10])
local seen = tonumber(redis.call('HGET', KEYS[1], 'pending') or '0') + tonumber(redis.call('HGET', KEYS[1], 'finished') or '0')
local pending, finished, stated = 0, 0, 0
for i = 11, #ARGV, 2 do
  local kind = ARGV[i + 1]
  local at = tonumber(ARGV[i])
  if kind == '3' then
    redis.call('LPUSH', KEYS[2], ARGV[i])
    stated = stated + 1
  else
    local isPending = kind == '1'
    if isPending then pending = pending + 1 else finished = finished + 1 end
    local step
    if kind == '2' then
      step = tonumber(at <= v and ARGV[2] or ARGV[1])
    else
      local gap = at - v
      if not ((isPending and gap < -r) or ((not isPending) and gap > r)) then
        step = tonumber(isPending and ARGV[1] or ARGV[2])
      end
    end
    if step then
      local n = seen + pending + finished - 1
      local gain = math.max(1, gain0 - (gain0 - 1) * n / gainOver)
      v = v + step * gain
      if v < lo then v = lo end
      if v > hi then v = hi end
    end
  end
end
if stated > 0 then
  redis.call('LTRIM', KEYS[2], 0, keep - 1)
  local times = redis.call('LRANGE', KEYS[2], 0, -1)
  if #times >= needed then
    local sorted = {}
    for i, t in ipairs(times) do sorted[i] = tonumber(t) end
    table.sort(sorted)
    v = sorted[math.max(1, math.ceil(q * #sorted))]
    if v < lo then v = lo end
    if v > hi then v = hi end
  end
end
if pending > 0 then redis.call('HINCRBY', KEYS[1], 'pending', pending) end
if finished > 0 then redis.call('HINCRBY', KEYS[1], 'finished', finished) end
redis.call('HSET', KEYS[1], 'logOffset', tostring(v))
return {tostring(v), seen + pending + finished}
