// The cap on queries created upstream and not yet finished, shared by every worker. Holding the
// pipeline short keeps results flowing early in a large batch and bounds what a quota stop strands.
// A slot is taken just before a create and given back by the outcome script (queue/outcomes.ts) or
// by `release` when the create did not happen.
import type { Redis } from 'ioredis';
import type { VqbKeys } from './redis.js';

// When the cap is reached, the oldest slots are checked first: a job removed by hand (the
// dashboard can) while its query was in flight would otherwise hold its slot for ever.
// ARGV: member, cap, now, job key prefix, batch key prefix
const ACQUIRE = `
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, 9)) do
    if redis.call('EXISTS', ARGV[4] .. member) == 0 then
      redis.call('ZREM', KEYS[1], member)
      local batch = string.match(member, '^(.*)%.')
      if batch then redis.call('HINCRBY', ARGV[5] .. batch, 'inflight', -1) end
    end
  end
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HINCRBY', KEYS[2], 'inflight', 1)
return 1
`;

const RELEASE = `
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then redis.call('HINCRBY', KEYS[2], 'inflight', -1) return 1 end
return 0
`;

interface InFlightCommands {
  vqbInflightAcquire(zset: string, batch: string, member: string, cap: number, now: number, jobPrefix: string, batchPrefix: string): Promise<number>;
  vqbInflightRelease(zset: string, batch: string, member: string): Promise<number>;
}

export class InFlight {
  readonly #redis: Redis & InFlightCommands;
  readonly #keys: VqbKeys;
  readonly #cap: number;

  readonly #jobPrefix: string;

  /** `jobPrefix` turns a job id into its BullMQ key (queue.toKey('')). */
  constructor(redis: Redis, keys: VqbKeys, cap: number, jobPrefix: string) {
    this.#jobPrefix = jobPrefix;
    redis.defineCommand('vqbInflightAcquire', { numberOfKeys: 2, lua: ACQUIRE });
    redis.defineCommand('vqbInflightRelease', { numberOfKeys: 2, lua: RELEASE });
    this.#redis = redis as Redis & InFlightCommands;
    this.#keys = keys;
    this.#cap = cap;
  }

  /** True when the job holds (or already held) a slot; false when the cap is reached. */
  async acquire(jobId: string, batchId: string, now: number): Promise<boolean> {
    return (await this.#redis.vqbInflightAcquire(this.#keys.inflight, this.#keys.batch(batchId), jobId, this.#cap, now, this.#jobPrefix, this.#keys.batch(''))) === 1;
  }

  async release(jobId: string, batchId: string): Promise<void> {
    await this.#redis.vqbInflightRelease(this.#keys.inflight, this.#keys.batch(batchId), jobId);
  }

  async count(): Promise<number> {
    return this.#redis.zcard(this.#keys.inflight);
  }
}
