--[[
  One first-poll sample for the shared poll schedule (workers/poll-schedule.ts): moves the stored
  log(first-poll delay / initial) by ARGV[1] unless the sample was taken too far from the current
  estimate to say anything about it.
    KEYS[1] the product's learner hash (logOffset, pending, finished counters)
    ARGV[1] step; ARGV[2] lowest, ARGV[3] highest offset; ARGV[4] counter field to increment;
    ARGV[5] log(elapsed / initial) of the sample; ARGV[6] relevance R; ARGV[7] '1' pending | '0' finished
  Returns the offset now in force (a string).
]]
local v = tonumber(redis.call('HGET', KEYS[1], 'logOffset') or '0')
redis.call('HINCRBY', KEYS[1], ARGV[4], 1)
local gap = tonumber(ARGV[5]) - v
local r = tonumber(ARGV[6])
if (ARGV[7] == '1' and gap < -r) or (ARGV[7] == '0' and gap > r) then return tostring(v) end
v = v + tonumber(ARGV[1])
local lo, hi = tonumber(ARGV[2]), tonumber(ARGV[3])
if v < lo then v = lo end
if v > hi then v = hi end
redis.call('HSET', KEYS[1], 'logOffset', tostring(v))
return tostring(v)
