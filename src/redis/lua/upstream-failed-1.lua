--[[
  An upstream request of the account got no usable answer (connection refused, a timeout, a
  reset, a 5xx): counts it on the account's line (queue/line.ts). The first failure after an
  answer starts the outage; the caller logs one warning when the count reaches its threshold, so
  a thousand failing requests make one line.
    KEYS[1] the account's line hash
    ARGV[1] epoch ms; ARGV[2] reason (e.g. "connection refused")
  Returns { since, attempts }.
]]
redis.call('HSETNX', KEYS[1], 'upSince', ARGV[1])
local attempts = redis.call('HINCRBY', KEYS[1], 'upAttempts', 1)
redis.call('HSET', KEYS[1], 'upReason', ARGV[2], 'upLastAt', ARGV[1])
return { redis.call('HGET', KEYS[1], 'upSince'), attempts }
