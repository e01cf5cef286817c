--[[
  Takes a forgotten batch's home out of the index (queue/batch/store.ts, retention): the id stays
  listed while another account still holds a batch of that id.
    KEYS[1] the index hash: batch id -> accounts holding it (G:batches:account)
    KEYS[2] the global list of batches by creation (G:batches)
    ARGV[1] the batch id
    ARGV[2] the account
  Returns the homes left (space-separated; '' when none is left and the id left the list too).
]]
local before = redis.call('HGET', KEYS[1], ARGV[1]) or ''
local left = {}
for home in string.gmatch(before, '%S+') do
  if home ~= ARGV[2] then left[#left + 1] = home end
end
if #left == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return ''
end
local rest = table.concat(left, ' ')
redis.call('HSET', KEYS[1], ARGV[1], rest)
return rest
