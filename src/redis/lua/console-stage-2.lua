--[[
  Stages a console upload only if it fits (console/uploads.ts, issue 35: unconfirmed uploads once
  filled Redis). The ledger holds every staged upload as `<owner>:<id>:<bytes>`, scored by when it
  expires; the expired are dropped first (their keys expired with them), then the session's count
  and bytes and everyone's are summed (at most the total cap of members) and checked.
    KEYS[1] the upload's key; KEYS[2] the ledger (zset)
    ARGV[1] now, ms; ARGV[2] time to live, ms; ARGV[3] the upload (JSON); ARGV[4] the ledger member;
    ARGV[5] the owner; ARGV[6] most uploads per owner; ARGV[7] most bytes per owner;
    ARGV[8] most uploads in all; ARGV[9] most bytes in all
  Returns 'OK', or what is full: 'SESSION_COUNT', 'SESSION_BYTES', 'TOTAL_COUNT', 'TOTAL_BYTES'.
]]
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local size = string.len(ARGV[3])
local count, bytes, total = 0, 0, 0
local members = redis.call('ZRANGE', KEYS[2], 0, -1)
for _, member in ipairs(members) do
  local owner, n = string.match(member, '^([^:]*):[^:]*:(%d+)$')
  n = tonumber(n) or 0
  total = total + n
  if owner == ARGV[5] then
    count = count + 1
    bytes = bytes + n
  end
end
if count + 1 > tonumber(ARGV[6]) then return 'SESSION_COUNT' end
if bytes + size > tonumber(ARGV[7]) then return 'SESSION_BYTES' end
if #members + 1 > tonumber(ARGV[8]) then return 'TOTAL_COUNT' end
if total + size > tonumber(ARGV[9]) then return 'TOTAL_BYTES' end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
-- The ledger lives as long as its last upload.
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 'OK'
