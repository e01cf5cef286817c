--[[
  Gives a batch id a home in an account (queue/batch/store.ts). A batch id is scoped by its account:
  two accounts may each hold a batch `order-1001`, and neither reaches the other's. The index keeps,
  per id, the accounts that hold it (space-separated, oldest first), so a look-up by id alone finds
  its homes and a look-up by a token's accounts finds only its own.
    KEYS[1] the index hash: batch id -> accounts holding it (G:batches:account)
    ARGV[1] the batch id
    ARGV[2] the account
  Returns the homes before this call (space-separated; '' when no account held the id).
]]
local before = redis.call('HGET', KEYS[1], ARGV[1]) or ''
for home in string.gmatch(before, '%S+') do
  if home == ARGV[2] then return before end
end
if before == '' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
else
  redis.call('HSET', KEYS[1], ARGV[1], before .. ' ' .. ARGV[2])
end
return before
