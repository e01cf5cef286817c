// What the upstream may bill us for, counted per batch and per UTC day: queries created, polls,
// 429s received, results reused instead of paid, and possible duplicate charges. This module alone
// reads and writes the cost hashes: one per batch, and one per day kept for 400 days.

import type { VqbKeys } from './keys.js';
import type { RedisClient } from './redis.js';

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

export class CostLedger {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;
  readonly #now: () => number;

  constructor(redis: RedisClient, keys: VqbKeys, now: () => number = Date.now) {
    this.#redis = redis;
    this.#keys = keys;
    this.#now = now;
  }

  /** One more of each field, for the batch and for today, in one round trip. */
  async count(batchId: string, ...fields: CostField[]): Promise<void> {
    const day = this.#keys.costDay(utcDay(this.#now()));
    const multi = this.#redis.multi();
    for (const field of fields) multi.hincrby(this.#keys.batchCosts(batchId), field, 1).hincrby(day, field, 1);
    await multi.expire(day, DAY_TTL_S).exec();
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
