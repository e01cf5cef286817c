--[[
  Reserves one create against every spending cap before it is sent (queue/budget.ts), so a cap
  of N stops at exactly N; the rule is includes/budget-take.lua, shared with create-admit.
    KEYS[1] the batch's budget hash (max, reserved); KEYS[2] the account's day counter;
    KEYS[3] the account's month counter; KEYS[4] the account's budget hash (run-time caps)
    ARGV[1] configured day cap, ARGV[2] configured month cap (-1 = none); ARGV[3] day TTL s; ARGV[4] month TTL s
  Returns 'ok', or which cap is reached: 'batch' | 'day' | 'month'.
]]
--- @include "budget-take"
local capped = budgetCapped(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]), tonumber(ARGV[2]))
if capped then return capped end
budgetTake(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4])
return 'ok'
