--[[
  Marks a batch's input complete (queue/batch/store.ts): from now on its last outcome finishes it,
  and if every plate already has one it is finished now (includes/batch-finish.lua).
    KEYS[1] the batch hash
    ARGV[1] now, epoch ms
  Returns -1 no such batch, 1 sealed, 2 sealed and finished.
]]
--- @include "batch-finish"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'sealed', '1')
if finishIfDone(KEYS[1], ARGV[1]) then return 2 end
return 1
