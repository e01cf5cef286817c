--[[
  Stores a plate's terminal outcome unless one exists, and moves the batch's counts in the same
  step (queue/batch/outcomes.ts). The batch is finished when its last plate lands (the rule is
  includes/batch-finish.lua, shared with batch-seal).
    KEYS[1] the batch's outcomes hash; KEYS[2] the batch hash
    ARGV[1] plate; ARGV[2] the outcome, packed (queue/compact.ts); ARGV[3] 'done' | 'failed'; ARGV[4] now, epoch ms;
    ARGV[5] '1' when a possible duplicate charge
  Returns 0 an outcome existed, 1 recorded, 2 recorded and the batch finished.
]]
--- @include "batch-finish"
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
if ARGV[5] == '1' then redis.call('HINCRBY', KEYS[2], 'possibleDuplicates', 1) end
if finishIfDone(KEYS[2], ARGV[4]) then return 2 end
return 1
