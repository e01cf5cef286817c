// What the upstream may bill us for, counted per batch and per UTC day: queries created, polls,
// 429s received, results reused instead of paid, and possible duplicate charges. This module alone
// reads and writes the cost hashes: one per batch, and one per account and day kept for 400 days
// (each on its account's slot, so a plate's count moves in the script that settles it). Days
// counted before issue 21's layout were one hash for all accounts: read in place, added in.

import { clock } from '../clock.js';
import type { RedisClient } from '../redis/connection.js';
import type { BatchRef, VqbKeys } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';

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

/** What the upstream's answers said of their own price, per batch (millionths; counts of answers). */
export interface ReportedCost {
  answers: number;
  micros: number;
  billed: number;
  notBilled: number;
}

const DAY_TTL_S = 400 * 86_400;

/** The last day named (utcDay): its first and next midnight, epoch ms, and its name. */
let lastDay = { from: 0, to: 0, name: '' };

/**
 * `20261121` for any moment of that UTC day. Named once a day: every create and outcome asks (a
 * Date and an ISO string each were 0.8 % of the samples of a V8 profile of a cold batch's worker).
 */
export function utcDay(now: number): string {
  if (now >= lastDay.from && now < lastDay.to) return lastDay.name;
  const from = now - (((now % 86_400_000) + 86_400_000) % 86_400_000);
  const name = new Date(now).toISOString().slice(0, 10).replaceAll('-', '');
  lastDay = { from, to: from + 86_400_000, name };
  return name;
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
  readonly #accounts: () => readonly string[];

  /** `accounts`: the ids whose days a report adds up (the configured accounts). */
  constructor(redis: RedisClient, keys: VqbKeys, accounts: () => readonly string[], now: () => number = clock.now) {
    this.#redis = withScripts(redis, ['cost-count']);
    this.#keys = keys;
    this.#accounts = accounts;
    this.#now = now;
  }

  /** One more of each field, for the batch and for today, in one script (the day's TTL set when it starts). */
  async count(batch: BatchRef, ...fields: CostField[]): Promise<void> {
    const { keys, fields: list, dayTtlS } = this.counting(batch, ...fields);
    await this.#redis.vqbCostCount(...keys, dayTtlS, list);
  }

  /** The same count, for a script that runs anyway to do it (see CostCount). */
  counting(batch: BatchRef, ...fields: CostField[]): CostCount {
    return {
      keys: [this.#keys.batchCosts(batch), this.#keys.costDay(batch.account, utcDay(this.#now()))],
      fields: fields.join(','),
      dayTtlS: DAY_TTL_S,
    };
  }

  /** Only the day's counter (the batch's own count moved elsewhere, e.g. in the outcome script). */
  async countDay(accountId: string, field: CostField): Promise<void> {
    const day = this.#keys.costDay(accountId, utcDay(this.#now()));
    await this.#redis.multi().hincrby(day, field, 1).expire(day, DAY_TTL_S).exec();
  }

  /** A batch's counters (possibleDuplicates is counted with its outcomes, in the batch). */
  async forBatch(batch: BatchRef): Promise<Omit<CostCounts, 'possibleDuplicates'>> {
    const fields = ['creates', 'createsSent', 'polls', 'pollsSent', 'rateLimited', 'reused'] as const;
    const values = await this.#redis.hmget(this.#keys.batchCosts(batch), ...fields);
    return Object.fromEntries(fields.map((field, i) => [field, Number(values[i] ?? 0)])) as Omit<
      CostCounts,
      'possibleDuplicates'
    >;
  }

  /**
   * What left for one account and may be billed, today and this month (UTC): the one reckoning
   * `vqb cost`, `vqb budget` and the console share (a `vqb check --create` is in it, though no
   * spending cap holds it).
   */
  async sentBy(accountId: string): Promise<{ today: CostCounts; thisMonth: CostCounts }> {
    const dayOfMonth = new Date(this.#now()).getUTCDate();
    const days = await this.days(dayOfMonth);
    const thisMonth = emptyCosts();
    for (const { byAccount } of days)
      for (const field of COST_FIELDS) thisMonth[field] += byAccount[accountId]?.[field] ?? 0;
    return { today: days[0]?.byAccount[accountId] ?? emptyCosts(), thisMonth };
  }

  /**
   * The last `days` UTC days, newest first, all accounts added up (`counts`) and each account's
   * own (`byAccount`: each may have its own price).
   */
  async days(days = 7): Promise<{ day: string; counts: CostCounts; byAccount: Record<string, CostCounts> }[]> {
    const out: { day: string; counts: CostCounts; byAccount: Record<string, CostCounts> }[] = [];
    const now = this.#now();
    const accounts = this.#accounts();
    for (let i = 0; i < days; i++) {
      const day = utcDay(now - i * 86_400_000);
      const keys = [...accounts.map((id) => this.#keys.costDay(id, day)), this.#keys.legacyCostDay(day)];
      const hashes = await Promise.all(keys.map((key) => this.#redis.hgetall(key)));
      const counts = emptyCosts();
      const byAccount: Record<string, CostCounts> = {};
      hashes.forEach((fields, n) => {
        const own = emptyCosts();
        for (const field of COST_FIELDS) own[field] = Number(fields[field] ?? 0);
        for (const field of COST_FIELDS) counts[field] += own[field];
        if (n < accounts.length) byAccount[accounts[n]!] = own;
      });
      out.push({ day, counts, byAccount });
    }
    return out;
  }

  /**
   * What one answer said of its own price (x-query-cost, x-billed), added up per batch beside the
   * estimate: the answers that said anything, the amount they stated, and how many said billed
   * or not billed. Not in the day's counters: the estimate is what `vqb cost` adds up.
   */
  async report(batch: BatchRef, billing: { costMicros?: number; billed?: boolean }): Promise<void> {
    const key = this.#keys.batchCosts(batch);
    const multi = this.#redis.multi().hincrby(key, 'reportedAnswers', 1);
    if (billing.costMicros !== undefined) multi.hincrby(key, 'reportedMicros', billing.costMicros);
    if (billing.billed !== undefined) multi.hincrby(key, billing.billed ? 'reportedBilled' : 'reportedNotBilled', 1);
    await multi.exec();
  }

  /** The batch's reported sums (see `report`); undefined when no answer said anything of its price. */
  async reportedFor(batch: BatchRef): Promise<ReportedCost | undefined> {
    const fields = ['reportedAnswers', 'reportedMicros', 'reportedBilled', 'reportedNotBilled'] as const;
    const [answers, micros, billed, notBilled] = await this.#redis.hmget(this.#keys.batchCosts(batch), ...fields);
    if (!answers) return undefined;
    return {
      answers: Number(answers),
      micros: Number(micros ?? 0),
      billed: Number(billed ?? 0),
      notBilled: Number(notBilled ?? 0),
    };
  }

  /** Deletes the batch's counters (retention; the day counters stay, they are not the batch's). */
  async forget(batch: BatchRef): Promise<void> {
    await this.#redis.del(this.#keys.batchCosts(batch));
  }
}
