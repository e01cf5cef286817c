--[[
  Picks the account's next creates (queue/scheduler.ts): classes in order (interactive, normal,
  bulk); within a class, stride scheduling: the batch with the smallest pass gives one plate and
  its pass grows by 1/weight, so batches share the class by weight. Picked plates are staged
  until their jobs exist, so a crash in between loses none.
    KEYS[1..3] the account's class zsets (interactive, normal, bulk); KEYS[4] hash batch -> weight;
    KEYS[5] the account's staged zset (member '<class>:<batch>.<plate>', score: when picked)
    ARGV[1] how many; ARGV[2] prefix of the per-batch pending lists; ARGV[3] now, epoch ms;
    ARGV[4] how many classes to serve, from the first (1: interactive only; 3: all)
  Returns a flat list: class index (1..3), batch id, plate, class index, batch id, plate, ...
]]
local n = tonumber(ARGV[1])
local out = {}
local picked = 0
for c = 1, tonumber(ARGV[4]) do
  while picked < n do
    local head = redis.call('ZRANGE', KEYS[c], 0, 0, 'WITHSCORES')
    if #head == 0 then break end
    local batch = head[1]
    local plate = redis.call('LPOP', ARGV[2] .. batch)
    if not plate then
      redis.call('ZREM', KEYS[c], batch)
    else
      local weight = tonumber(redis.call('HGET', KEYS[4], batch) or '1')
      redis.call('ZADD', KEYS[c], tonumber(head[2]) + 1 / weight, batch)
      redis.call('ZADD', KEYS[5], ARGV[3], c .. ':' .. batch .. '.' .. plate)
      out[#out + 1] = c
      out[#out + 1] = batch
      out[#out + 1] = plate
      picked = picked + 1
    end
  end
end
return out
