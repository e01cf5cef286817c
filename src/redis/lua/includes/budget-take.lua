--[[
  The spending caps' rule, in one place (queue/budget.ts): one create reserved against the batch's
  cap and the account's day and month caps, so a cap of N stops at exactly N. The account's caps
  set at run time (`vqb budget`, its budget hash: '' removes one) win over the configured ones.
  Included by budget-reserve and create-admit.
  budgetCapped(batchBudgetKey, dayKey, monthKey, accountBudgetKey, dayCap, monthCap) → false, or
    which cap is reached: 'batch' | 'day' | 'month'. dayCap / monthCap: configured, -1 = none.
  budgetTake(batchBudgetKey, dayKey, monthKey, dayTtlS, monthTtlS) reserves one.
]]
local function budgetCapped(batchBudgetKey, dayKey, monthKey, accountBudgetKey, dayCap, monthCap)
  local b = redis.call('HMGET', batchBudgetKey, 'max', 'reserved')
  local maxB = tonumber(b[1] or '-1') or -1
  if maxB >= 0 and tonumber(b[2] or '0') >= maxB then return 'batch' end
  local run = redis.call('HMGET', accountBudgetKey, 'perDay', 'perMonth')
  local capD, capM = dayCap, monthCap
  if run[1] then capD = tonumber(run[1]) or -1 end
  if run[2] then capM = tonumber(run[2]) or -1 end
  if capD >= 0 and tonumber(redis.call('GET', dayKey) or '0') >= capD then return 'day' end
  if capM >= 0 and tonumber(redis.call('GET', monthKey) or '0') >= capM then return 'month' end
  return false
end

local function budgetTake(batchBudgetKey, dayKey, monthKey, dayTtlS, monthTtlS)
  redis.call('HINCRBY', batchBudgetKey, 'reserved', 1)
  if redis.call('INCR', dayKey) == 1 then redis.call('EXPIRE', dayKey, dayTtlS) end
  if redis.call('INCR', monthKey) == 1 then redis.call('EXPIRE', monthKey, monthTtlS) end
end
