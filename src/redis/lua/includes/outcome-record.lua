--[[
  The outcome rule, in one place (queue/batch/outcomes.ts): a plate's terminal outcome is stored
  unless one exists, and the batch's counts move in the same step; the batch is finished when its
  last plate lands (needs includes/batch-finish.lua before it). Included by batch-record and
  plate-settle.
  recordOutcome(outcomesKey, batchKey, plate, packed, status, now, possibleDuplicate)
    → 0 an outcome existed, 1 recorded, 2 recorded and the batch finished.
]]
local function recordOutcome(outcomesKey, batchKey, plate, packed, status, now, possibleDuplicate)
  if redis.call('HSETNX', outcomesKey, plate, packed) == 0 then return 0 end
  redis.call('HINCRBY', batchKey, status, 1)
  if possibleDuplicate == '1' then redis.call('HINCRBY', batchKey, 'possibleDuplicates', 1) end
  if finishIfDone(batchKey, now) then return 2 end
  return 1
end
