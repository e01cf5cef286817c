--[[
  Releases a lock only if this holder still owns it (producers/ingest.ts: one ingest per batch).
    KEYS[1] the lock; ARGV[1] the holder's token
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
