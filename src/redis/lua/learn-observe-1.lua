--[[
  First-poll samples for the shared poll schedule (queue/poll-schedule.ts), in the order they were
  taken: each moves the stored log(first-poll delay / initial) by its step unless it was taken too
  far from the estimate in force to say anything about it. A process sends what it gathered at
  most every half second (one call, not one a plate: issue 21).
    KEYS[1] the product's learner hash (logOffset, pending, finished counters)
    ARGV[1] step of a pending sample; ARGV[2] step of a finished one; ARGV[3] lowest, ARGV[4]
    highest offset; ARGV[5] relevance R; then per sample: log(elapsed / initial) and its kind:
    '1' pending at that time, '0' finished by that time, '2' finished, having taken exactly that
    time (the upstream said so): a sample at the estimate in force whenever it was taken (finished
    if it took no longer, else as a pending one), so it always counts.
  Returns the offset now in force (a string).
]]
local v = tonumber(redis.call('HGET', KEYS[1], 'logOffset') or '0')
local lo, hi, r = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local pending, finished = 0, 0
for i = 6, #ARGV, 2 do
  local kind = ARGV[i + 1]
  local at = tonumber(ARGV[i])
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
    v = v + step
    if v < lo then v = lo end
    if v > hi then v = hi end
  end
end
if pending > 0 then redis.call('HINCRBY', KEYS[1], 'pending', pending) end
if finished > 0 then redis.call('HINCRBY', KEYS[1], 'finished', finished) end
redis.call('HSET', KEYS[1], 'logOffset', tostring(v))
return tostring(v)
