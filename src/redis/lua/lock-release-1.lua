--[[
  Releases a lock only if this holder still owns it (producers/ingest.ts: one ingest per batch;
  src/retention.ts; src/redis/layout.ts).
    KEYS[1] the lock; ARGV[1] the holder's token
    ARGV[2] optional: a channel to publish the lock's key on once released, for whoever waits on it
            (queue/batch/store.ts lockIngest, src/redis/layout.ts: a wait is a message, not a loop
            asking again)
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
  return 1
end
return 0
