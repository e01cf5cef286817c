--[[
  Stores a plate's terminal outcome unless one exists, and moves the batch's counts in the same
  step (queue/batch/outcomes.ts; the rule is includes/outcome-record.lua, shared with
  plate-settle). The batch is finished when its last plate lands (includes/batch-finish.lua,
  shared with batch-seal).
    KEYS[1] the batch's outcomes hash; KEYS[2] the batch hash
    ARGV[1] plate; ARGV[2] the outcome, packed (src/redis/compact.ts); ARGV[3] 'done' | 'failed'; ARGV[4] now, epoch ms;
    ARGV[5] '1' when a possible duplicate charge
  Returns 0 an outcome existed, 1 recorded, 2 recorded and the batch finished.
]]
--- @include "batch-finish"
--- @include "outcome-record"
return recordOutcome(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
