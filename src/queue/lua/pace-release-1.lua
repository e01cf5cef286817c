--[[
  Gives back a reserved slot that will not be used (the create was held by a cap), if no later
  slot was reserved after it (queue/accounts.ts).
    KEYS[1] the account's pace hash
    ARGV[1] the tat the reservation set; ARGV[2] the interval it added, ms
  Returns 1 when given back.
]]
if redis.call('HGET', KEYS[1], 'tat') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'tat', tostring(tonumber(ARGV[1]) - tonumber(ARGV[2])))
return 1
