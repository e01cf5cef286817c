--[[
  An upstream request of the account was answered: an outage recorded by upstream-failed ends
  (queue/line.ts). Only the call that ends it gets the outage back, so one process logs
  "reachable again"; the line keeps when it came back, for status and the console.
    KEYS[1] the account's line hash
    ARGV[1] epoch ms
  Returns {} when no outage was recorded, else { since, attempts, reason }.
]]
local since = redis.call('HGET', KEYS[1], 'upSince')
if not since then return {} end
local attempts = redis.call('HGET', KEYS[1], 'upAttempts') or '0'
local reason = redis.call('HGET', KEYS[1], 'upReason') or ''
redis.call('HDEL', KEYS[1], 'upSince', 'upAttempts', 'upReason', 'upLastAt')
redis.call('HSET', KEYS[1], 'upBackAt', ARGV[1], 'upDownMs', tonumber(ARGV[1]) - tonumber(since), 'upBackReason', reason, 'upBackAttempts', attempts)
return { since, attempts, reason }
