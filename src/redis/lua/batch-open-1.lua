--[[
  Creates a batch's hash unless it exists (queue/batch/store.ts), stamped with its creation time and
  the digest of its content in one step, so a second producer given the same id at the same moment
  always finds the digest to compare with.
    KEYS[1] the batch hash
    ARGV[1] now, epoch ms (createdAt)
    ARGV[2] the digest of the batch's content ('' when not known)
  Returns {1, digest} created; {0, digest} it existed, with the digest stored when it was created
  ('' for a batch created without one).
]]
if redis.call('HSETNX', KEYS[1], 'createdAt', ARGV[1]) == 1 then
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'digest', ARGV[2]) end
  return {1, ARGV[2]}
end
return {0, redis.call('HGET', KEYS[1], 'digest') or ''}
