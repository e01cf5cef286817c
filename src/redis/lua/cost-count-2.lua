--[[
  Counts what the upstream may bill (queue/costs.ts): one more of each field for the batch and
  the day, in one step (was a MULTI with an EXPIRE on every count).
    KEYS[1] the batch's cost hash; KEYS[2] the UTC day's cost hash
    ARGV[1] the day hash's time to live, s; ARGV[2] the fields, comma-separated
]]
--- @include "cost-count"
countCosts(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
return 1
