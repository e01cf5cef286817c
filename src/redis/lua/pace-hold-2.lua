--[[
  Holds every request of the account for ARGV[1] ms, unless a longer hold is in force: a 429
  asking for 1 s must not cut short a quota hold of 6 h set by another worker (queue/line.ts).
    KEYS[1] the account's pace hash (field hold: epoch ms, read by pace-acquire, create-admit,
            pace-held and job-fence against their now)
    KEYS[2] the account's line hash (for status)
    ARGV[1] ms; ARGV[2] reason: rate_limit | quota; ARGV[3] now, epoch ms: only a test that owns
    time passes it (production: '' or absent, Redis TIME)
    ARGV[4] the hold news channel, ARGV[5] the account's id (optional: queue/hold-news.ts): a hold
    set or lengthened is published there as "<account> <ms>", so a request that slept for its slot
    learns of it without asking Redis (the worker's pace-held call a poll, issue 43)
  Returns the epoch ms the hold ends when this call set or lengthened it, else 0.
]]
local now
if ARGV[3] ~= nil and ARGV[3] ~= '' then
  now = tonumber(ARGV[3])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local untilMs = now + tonumber(ARGV[1])
if tonumber(redis.call('HGET', KEYS[1], 'hold') or '0') >= untilMs then return 0 end
redis.call('HSET', KEYS[1], 'hold', tostring(untilMs))
redis.call('HSET', KEYS[2], 'limitedUntil', tostring(untilMs), 'limitReason', ARGV[2])
if ARGV[4] ~= nil and ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], ARGV[5] .. ' ' .. ARGV[1]) end
return untilMs
