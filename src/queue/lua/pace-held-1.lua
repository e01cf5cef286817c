--[[
  How long the account's hold (a 429 or a used-up quota, set by pace-hold) still lasts, on Redis's
  clock (queue/line.ts): a request that reserved its slot before another worker's 429 set the
  hold waits it out before it is sent.
    KEYS[1] the account's pace hash (field hold, epoch ms)
  Returns the ms left (0 when no hold is in force).
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hold = tonumber(redis.call('HGET', KEYS[1], 'hold') or '0')
if hold > now then return hold - now end
return 0
