--[[
  Adds one sample to a bounded time series (queue/series.ts): a list of `<epoch ms>,<values>`,
  oldest first, never longer than ARGV[4] and never closer together than the gap.
    KEYS[1] the series' list
    ARGV[1] now, epoch ms ('' = Redis TIME, shared by every machine; tests pass their clock)
    ARGV[2] the smallest gap between two samples, ms
    ARGV[3] spread: 0 = a window (the newest ARGV[4] samples are kept); n > 0 = a whole life (the
            gap grows to the series' span / n, and a full list is thinned to every other sample,
            its first and last kept)
    ARGV[4] the most samples kept
    ARGV[5] the list's time to live, ms (renewed by each sample: an idle series goes)
    ARGV[6] the sample's values, comma-separated
  Returns 1 when the sample was added, 0 when it came too soon after the last one.
]]
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local gap = tonumber(ARGV[2])
local spread = tonumber(ARGV[3])
local max = tonumber(ARGV[4])
local last = redis.call('LINDEX', KEYS[1], -1)
if last then
  local need = gap
  if spread > 0 then
    local first = tonumber(string.match(redis.call('LINDEX', KEYS[1], 0), '^(%d+)'))
    need = math.max(gap, (now - first) / spread)
  end
  if now - tonumber(string.match(last, '^(%d+)')) < need then return 0 end
end
redis.call('RPUSH', KEYS[1], string.format('%d', now) .. ',' .. ARGV[6])
local n = redis.call('LLEN', KEYS[1])
if n > max then
  if spread > 0 then
    local all = redis.call('LRANGE', KEYS[1], 0, -1)
    local kept = {}
    for i = 1, #all do
      if i % 2 == 1 or i == #all then kept[#kept + 1] = all[i] end
    end
    redis.call('DEL', KEYS[1])
    redis.call('RPUSH', KEYS[1], unpack(kept))
  else
    redis.call('LTRIM', KEYS[1], n - max, -1)
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
