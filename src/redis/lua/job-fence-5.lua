--[[
  Writes a plate job's data only when the writer may (queue/job-fence.ts). This is the fence
  that keeps a paused or stale worker from sending a create, or from writing over a step another
  worker has moved the job to since: the lock says who holds the job now, the stored step and
  createId say what the writer last saw.
    KEYS[1] the job's hash (BullMQ's; its `data` field is read and written, and its `priority`
            field when ARGV[7] is set: what BullMQ's changePriority does for an active job,
            without its six other calls)
    KEYS[2] the job's lock key (BullMQ's: the token of the worker that holds the job)
    KEYS[3] the batch's cost hash; KEYS[4] the UTC day's cost hash (queue/costs.ts; counted only
            when ARGV[6] names fields)
    KEYS[5] the account's pace hash (queue/line.ts: its `hold` field, the end of a hold in force;
            read only when ARGV[9] is '1')
    ARGV[1] the lock token the writer holds ('' = this write does not need the lock)
    ARGV[2] the step the stored data must still be at
    ARGV[3] the createId the stored data must still carry ('' = none)
    ARGV[4] the new data (JSON)
    ARGV[5] '1': a stored step `create` is accepted too (a query id being stored: the `creating`
            mark it follows was lost, e.g. in a failover, and nobody has sent since)
    ARGV[6] cost fields to count, comma-separated ('' = none): counted whether or not the write
            is allowed (a request that was answered is paid for, whoever stores its answer)
    ARGV[7] the job's new BullMQ priority ('' = unchanged); ARGV[8] the day hash's time to live, s
    ARGV[9] '1': the write is the last before a request, and the reply says the ms left of the
            account's hold too (a 429 elsewhere since the slot was taken), as {result, ms}
    ARGV[10] now, epoch ms, for the hold: only a test that owns time passes it (production:
            absent, Redis TIME)
  Returns 1 written; 0 the lock is not the writer's; -1 the stored step or createId moved on;
  -2 no such job (removed). With ARGV[9] '1': {that result, ms of hold left (0 = none)}.
]]
--- @include "cost-count"
--- @include "pace-take"
if ARGV[6] ~= '' then countCosts(KEYS[3], KEYS[4], ARGV[8], ARGV[6]) end
local function write()
  local raw = redis.call('HGET', KEYS[1], 'data')
  if not raw then return -2 end
  if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
  local ok, stored = pcall(cjson.decode, raw)
  if not ok or type(stored) ~= 'table' then return -1 end
  local createId = stored.createId
  if type(createId) ~= 'string' then createId = '' end
  local lostMark = ARGV[5] == '1' and stored.step == 'create'
  if not lostMark and (stored.step ~= ARGV[2] or createId ~= ARGV[3]) then return -1 end
  if ARGV[7] ~= '' then
    redis.call('HSET', KEYS[1], 'data', ARGV[4], 'priority', ARGV[7])
  else
    redis.call('HSET', KEYS[1], 'data', ARGV[4])
  end
  return 1
end
local result = write()
if ARGV[9] ~= '1' then return result end
return {result, paceHeldFor(KEYS[5], ARGV[10])}
