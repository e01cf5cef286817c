--[[
  An operator's resume (queue/line.ts): takes the recorded pause away and notes when, so a key
  failure of a request sent before now does not pause the account again (account-pause-1.lua).
    KEYS[1] the account's line hash
    ARGV[1] epoch ms
  Returns the lifted pause as {code, message, at}, or {} when none was recorded.
]]
local lifted = redis.call('HMGET', KEYS[1], 'code', 'message', 'at')
redis.call('HDEL', KEYS[1], 'code', 'message', 'at')
redis.call('HSET', KEYS[1], 'resumedAt', ARGV[1])
if not lifted[1] then return {} end
return {lifted[1], lifted[2] or '', lifted[3] or '0'}
