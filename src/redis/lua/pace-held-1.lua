--[[
  Ms left of the account's hold (queue/line.ts heldFor): the pace hash's `hold` field, the end of
  a hold (a 429, a quota) pace-hold wrote, against now. A request asks it right before it leaves,
  in case a hold came while it slept for its slot. The hold is a field compared with a now, not a
  key's time to live, so a test that owns time holds and lifts it too.
    KEYS[1] the account's pace hash
    ARGV[1] now, epoch ms: only a test that owns time passes it (production: absent, Redis TIME)
  Returns the ms left (0: no hold in force).
]]
--- @include "pace-take"
return paceHeldFor(KEYS[1], ARGV[1])
