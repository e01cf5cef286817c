--[[
  Picks the account's next creates (queue/scheduler.ts): the rule is includes/sched-take.lua.
    KEYS[1..3] the account's class zsets (interactive, normal, bulk); KEYS[4] hash batch -> weight;
    KEYS[5] the account's staged zset (member '<class>:<batch>.<plate>', score: when picked)
    ARGV[1] how many; ARGV[2] prefix of the per-batch pending lists; ARGV[3] now, epoch ms;
    ARGV[4] how many classes to serve, from the first (1: interactive only; 3: all);
    ARGV[5] the pending prefix of any account, its id written `{{home}}` (a lent pooled batch's list)
  Returns a flat list: class index (1..3), batch id, plate, class index, batch id, plate, ...
]]
--- @include "sched-take"
local out = {}
takePlates({KEYS[1], KEYS[2], KEYS[3]}, KEYS[4], KEYS[5], ARGV[2], ARGV[3], tonumber(ARGV[1]), tonumber(ARGV[4]), out,
  ARGV[5])
return out
