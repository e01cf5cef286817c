--[[
  Adaptive spacing (AIMD) of one account (queue/accounts.ts): a 429 lengthens the interval
  (x1.25 + a tenth of the base), every answer without one shortens it by a fiftieth of the base.
  With a configured limit above the upstream's real one, the account settles just under it.
    KEYS[1] the account's pace hash (field extra, ms)
    ARGV[1] '429' | 'ok'; ARGV[2] base interval, ms; ARGV[3] cap, ms
  Returns the extra spacing now in force, ms (a string).
]]
local extra = tonumber(redis.call('HGET', KEYS[1], 'extra') or '0')
local base = tonumber(ARGV[2])
if ARGV[1] == '429' then
  extra = math.min(tonumber(ARGV[3]), extra * 1.25 + base * 0.1)
else
  if extra <= 0 then return '0' end
  extra = math.max(0, extra - base * 0.02)
end
redis.call('HSET', KEYS[1], 'extra', tostring(extra))
return tostring(extra)
