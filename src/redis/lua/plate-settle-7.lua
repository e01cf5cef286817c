--[[
  A plate's end in one step (queue/plate-settle.ts): its terminal outcome stored unless one exists
  (includes/outcome-record.lua), its in-flight slot given back (includes/inflight-release.lua),
  and the last request's cost counted (includes/cost-count.lua). Three scripts a plate became one
  (issue 21); each rule still has one owner, who hands its keys and arguments.
    KEYS[1] the batch's outcomes hash; KEYS[2] the batch hash (queue/batch/)
    KEYS[3] the account's in-flight zset; KEYS[4] its slots per batch (queue/inflight.ts)
    KEYS[5] the batch's cost hash; KEYS[6] the UTC day's cost hash (queue/costs.ts)
    ARGV[1..5] as batch-record: plate, packed outcome, 'done' | 'failed', now (epoch ms), '1' possible duplicate
    ARGV[6] job id; ARGV[7] batch id (inflight-release)
    ARGV[8] the day hash's time to live, s; ARGV[9] cost fields, comma-separated ('' = none)
    KEYS[7] the account's reuse day hash (queue/reuse.ts pointerTerms; KEYS[1] again when none)
    ARGV[10] the pointer's field, the plate ('' = none); ARGV[11] its value; ARGV[12] the day
    hash's time to live, ms, set when the hash has none (whichever process wrote it first)
    ARGV[13] cost fields counted only when this call stores the outcome ('' = none): a result
    reused from an earlier batch is free, and counts as reused only if it became the plate's
    outcome. Counted here, not after, so a batch that finishes on this plate is read whole.
  The count is made whoever's outcome is stored (an answer is paid for either way), except when the
  stored outcome is this very one: the same call ran before and its reply was lost, so it counted.
  The pointer to this batch's result is written with the outcome that this call stored (or stored
  before, the reply lost), so later batches find the paid result (one round trip a plate fewer
  than a write of its own, issue 43).
  Returns 0 an outcome existed, 1 recorded, 2 recorded and the batch finished.
]]
--- @include "batch-finish"
--- @include "outcome-record"
--- @include "inflight-release"
--- @include "cost-count"
local recorded = recordOutcome(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
local again = recorded == 0 and redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2]
if not again and ARGV[9] ~= '' then countCosts(KEYS[5], KEYS[6], ARGV[8], ARGV[9]) end
if recorded ~= 0 and ARGV[13] ~= nil and ARGV[13] ~= '' then countCosts(KEYS[5], KEYS[6], ARGV[8], ARGV[13]) end
releaseInflight(KEYS[3], KEYS[4], ARGV[6], ARGV[7])
if (recorded ~= 0 or again) and ARGV[10] ~= nil and ARGV[10] ~= '' then
  redis.call('HSET', KEYS[7], ARGV[10], ARGV[11])
  if redis.call('PTTL', KEYS[7]) == -1 then redis.call('PEXPIRE', KEYS[7], ARGV[12]) end
end
return recorded
