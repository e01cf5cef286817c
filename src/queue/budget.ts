// Spending caps: per batch (max creates) and per key per UTC day and month. A create reserves one
// unit of every cap in one Lua step before it is sent, and gives it back when the create certainly
// did not happen, so a cap of N stops creates at exactly N. Reaching a cap never fails a plate:
// the plate waits (see workers/processor.ts) and goes on when the cap is raised or resets.
import type { Redis } from 'ioredis';
import { nextUtcDay, nextUtcMonth, utcDay, utcMonth } from './costs.js';
import type { VqbKeys } from './redis.js';

export type BudgetVerdict = 'ok' | 'batch' | 'day' | 'month';

export interface Caps {
  perDay: number | undefined;
  perMonth: number | undefined;
}

// KEYS: batch hash, day counter, month counter. ARGV: day cap, month cap (-1 = none), day TTL s, month TTL s
const RESERVE = `
local maxB = tonumber(redis.call('HGET', KEYS[1], 'maxCreates') or '-1')
if maxB >= 0 and tonumber(redis.call('HGET', KEYS[1], 'reservedCreates') or '0') >= maxB then return 'batch' end
local capD, capM = tonumber(ARGV[1]), tonumber(ARGV[2])
if capD >= 0 and tonumber(redis.call('GET', KEYS[2]) or '0') >= capD then return 'day' end
if capM >= 0 and tonumber(redis.call('GET', KEYS[3]) or '0') >= capM then return 'month' end
redis.call('HINCRBY', KEYS[1], 'reservedCreates', 1)
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('INCR', KEYS[3])
redis.call('EXPIRE', KEYS[3], ARGV[4])
return 'ok'
`;

const REFUND = `
redis.call('HINCRBY', KEYS[1], 'reservedCreates', -1)
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then redis.call('DECR', KEYS[2]) end
if tonumber(redis.call('GET', KEYS[3]) or '0') > 0 then redis.call('DECR', KEYS[3]) end
return 1
`;

interface BudgetCommands {
  vqbBudgetReserve(batch: string, day: string, month: string, capD: number, capM: number, ttlD: number, ttlM: number): Promise<BudgetVerdict>;
  vqbBudgetRefund(batch: string, day: string, month: string): Promise<number>;
}

export class Budget {
  readonly #redis: Redis & BudgetCommands;
  readonly #keys: VqbKeys;
  readonly #configured: Caps;
  readonly #now: () => number;
  #cache: { at: number; caps: Caps } | undefined;

  constructor(redis: Redis, keys: VqbKeys, configured: Caps, now: () => number = Date.now) {
    redis.defineCommand('vqbBudgetReserve', { numberOfKeys: 3, lua: RESERVE });
    redis.defineCommand('vqbBudgetRefund', { numberOfKeys: 3, lua: REFUND });
    this.#redis = redis as Redis & BudgetCommands;
    this.#keys = keys;
    this.#configured = configured;
    this.#now = now;
  }

  /** Key-wide caps: set at run time (`vqb budget`) over the configured ones; read at most once a second. */
  async caps(): Promise<Caps> {
    const now = this.#now();
    if (this.#cache && now - this.#cache.at < 1_000) return this.#cache.caps;
    const fields = await this.#redis.hgetall(this.#keys.budget);
    const pick = (stored: string | undefined, configured: number | undefined) => (stored === undefined ? configured : stored === '' ? undefined : Number(stored));
    const caps = { perDay: pick(fields.perDay, this.#configured.perDay), perMonth: pick(fields.perMonth, this.#configured.perMonth) };
    this.#cache = { at: now, caps };
    return caps;
  }

  /** Run-time caps; `null` removes a cap, `undefined` leaves it as it is. */
  async setCaps(caps: { perDay?: number | null; perMonth?: number | null }): Promise<void> {
    for (const [field, value] of Object.entries(caps)) {
      if (value !== undefined) await this.#redis.hset(this.#keys.budget, field, value === null ? '' : String(value));
    }
    this.#cache = undefined;
  }

  async reserve(batchId: string): Promise<BudgetVerdict> {
    const now = this.#now();
    const caps = await this.caps();
    return this.#redis.vqbBudgetReserve(
      this.#keys.batch(batchId),
      this.#keys.spendDay(utcDay(now)),
      this.#keys.spendMonth(utcMonth(now)),
      caps.perDay ?? -1,
      caps.perMonth ?? -1,
      3 * 86_400,
      40 * 86_400,
    );
  }

  async refund(batchId: string): Promise<void> {
    const now = this.#now();
    await this.#redis.vqbBudgetRefund(this.#keys.batch(batchId), this.#keys.spendDay(utcDay(now)), this.#keys.spendMonth(utcMonth(now)));
  }

  /** When a key-wide cap that was reached frees up again. */
  resetsAt(verdict: 'day' | 'month'): number {
    return verdict === 'day' ? nextUtcDay(this.#now()) : nextUtcMonth(this.#now());
  }

  async spent(): Promise<{ today: number; thisMonth: number }> {
    const now = this.#now();
    const [d, m] = await this.#redis.mget(this.#keys.spendDay(utcDay(now)), this.#keys.spendMonth(utcMonth(now)));
    return { today: Number(d ?? 0), thisMonth: Number(m ?? 0) };
  }
}
