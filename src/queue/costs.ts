// What the upstream may bill us for, counted per batch and per UTC day: queries created, polls,
// 429s received, results reused instead of paid, and possible duplicate charges. This module alone
// reads and writes the cost hashes: one per batch, and one per day kept for 400 days.

import type { VqbKeys } from './keys.js';
import type { RedisClient } from './redis.js';
import { type Scripted, withScripts } from './scripts.js';

/**
 * creates / polls: answered (a query id, a status). createsSent / pollsSent: every request that
 * left and was not refused by the upstream's own error answer (429, a key failure), whatever came
 * back: what the upstream may bill, so the invoice can be reconciled against it.
 */
export type CostField =
  | 'creates'
  | 'createsSent'
  | 'polls'
  | 'pollsSent'
  | 'rateLimited'
  | 'reused'
  | 'possibleDuplicates';
export const COST_FIELDS: readonly CostField[] = [
  'creates',
  'createsSent',
  'polls',
  'pollsSent',
  'rateLimited',
  'reused',
  'possibleDuplicates',
];

export type CostCounts = Record<CostField, number>;

const DAY_TTL_S = 400 * 86_400;

/** `20261121` for any moment of that UTC day. */
export function utcDay(now: number): string {
  return new Date(now).toISOString().slice(0, 10).replaceAll('-', '');
}

export function utcMonth(now: number): string {
  return utcDay(now).slice(0, 6);
}

/** Epoch ms of the next UTC midnight / first of next month after `now`. */
export function nextUtcDay(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

export function nextUtcMonth(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

export function emptyCosts(): CostCounts {
  return { creates: 0, createsSent: 0, polls: 0, pollsSent: 0, rateLimited: 0, reused: 0, possibleDuplicates: 0 };
}

/**
 * Counts handed to another script that runs anyway (job-fence, when a create's answer is stored):
 * the cost hashes and the fields, counted there by the same rule (lua/includes/cost-count.lua).
 */
export interface CostCount {
  keys: [batch: string, day: string];
  fields: string;
  dayTtlS: number;
}

export class CostLedger {
  readonly #redis: Scripted<'cost-count'>;
  readonly #keys: VqbKeys;
  readonly #now: () => number;

  constructor(redis: RedisClient, keys: VqbKeys, now: () => number = Date.now) {
    this.#redis = withScripts(redis, ['cost-count']);
    this.#keys = keys;
    this.#now = now;
  }

  /** One more of each field, for the batch and for today, in one script (the day's TTL set when it starts). */
  async count(batchId: string, ...fields: CostField[]): Promise<void> {
    const { keys, fields: list, dayTtlS } = this.counting(batchId, ...fields);
    await this.#redis.vqbCostCount(...keys, dayTtlS, list);
  }

  /** The same count, for a script that runs anyway to do it (see CostCount). */
  counting(batchId: string, ...fields: CostField[]): CostCount {
    return {
      keys: [this.#keys.batchCosts(batchId), this.#keys.costDay(utcDay(this.#now()))],
      fields: fields.join(','),
      dayTtlS: DAY_TTL_S,
    };
  }

  /** Only the day's counter (the batch's own count moved elsewhere, e.g. in the outcome script). */
  async countDay(field: CostField): Promise<void> {
    const day = this.#keys.costDay(utcDay(this.#now()));
    await this.#redis.multi().hincrby(day, field, 1).expire(day, DAY_TTL_S).exec();
  }

  /** A batch's counters (possibleDuplicates is counted with its outcomes, in the batch). */
  async forBatch(batchId: string): Promise<Omit<CostCounts, 'possibleDuplicates'>> {
    const fields = ['creates', 'createsSent', 'polls', 'pollsSent', 'rateLimited', 'reused'] as const;
    const values = await this.#redis.hmget(this.#keys.batchCosts(batchId), ...fields);
    return Object.fromEntries(fields.map((field, i) => [field, Number(values[i] ?? 0)])) as Omit<
      CostCounts,
      'possibleDuplicates'
    >;
  }

  /** The last `days` UTC days, newest first. */
  async days(days = 7): Promise<{ day: string; counts: CostCounts }[]> {
    const out: { day: string; counts: CostCounts }[] = [];
    const now = this.#now();
    for (let i = 0; i < days; i++) {
      const day = utcDay(now - i * 86_400_000);
      const fields = await this.#redis.hgetall(this.#keys.costDay(day));
      const counts = emptyCosts();
      for (const field of COST_FIELDS) counts[field] = Number(fields[field] ?? 0);
      out.push({ day, counts });
    }
    return out;
  }

  /** Deletes the batch's counters (retention; the day counters stay, they are not the batch's). */
  async forget(batchId: string): Promise<void> {
    await this.#redis.del(this.#keys.batchCosts(batchId));
  }
}
