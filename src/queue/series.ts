// Small time series for the console's charts (issue 47, 6), kept in Redis while batches run: a
// batch's progress over its life (done, failed, its account's requests and rate in force) and each
// account's requests against its limit over the last hour. This module alone reads and writes
// them. Bounded: a batch keeps at most BATCH_POINTS samples spread over its whole life (thinned to
// every other one when full), an account the samples of the last hour. Cost follows work: a
// sample is taken only while a batch runs, at most one per gap whoever asks (series-add.lua), and
// an idle series expires.

import type { RedisClient } from '../redis/connection.js';
import type { BatchRef, VqbKeys } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import type { CostCounts } from './costs.js';

/** A batch at one instant: plates done and failed, its account's requests of the UTC day so far, its rate in force. */
export interface BatchPoint {
  at: number;
  done: number;
  failed: number;
  /** The account's requests counted this UTC day (every process's), as `accountRequests` reads them. */
  requests: number;
  /** The account's rate in force, requests per second (0 when unknown). */
  limit: number;
}

/** An account at one instant: its requests of the UTC day so far and its rate in force. */
export interface AccountPoint {
  at: number;
  requests: number;
  limit: number;
}

/** A rate between two samples: requests a second over (from, at], and the limit in force at `at`. */
export interface RatePoint {
  from: number;
  at: number;
  perSecond: number;
  limit: number;
}

export const BATCH_POINTS = 120;
const BATCH_GAP_MS = 5_000;
const BATCH_TTL_MS = 7 * 86_400_000;
export const ACCOUNT_WINDOW_MS = 3_600_000;
const ACCOUNT_GAP_MS = 15_000;
const ACCOUNT_POINTS = ACCOUNT_WINDOW_MS / ACCOUNT_GAP_MS + 1;
const ACCOUNT_TTL_MS = 2 * ACCOUNT_WINDOW_MS;

/** Requests that count against an account's limit, from its day's cost counts: sent, and refused with a 429. */
export function accountRequests(today: CostCounts): number {
  return today.createsSent + today.pollsSent + today.rateLimited;
}

/**
 * Requests a second between consecutive samples. The day's count starts again at UTC midnight: a
 * count that went down is read as counted from zero.
 */
export function ratesOf(points: readonly Pick<AccountPoint, 'at' | 'requests' | 'limit'>[]): RatePoint[] {
  const rates: RatePoint[] = [];
  for (let i = 1; i < points.length; i++) {
    const before = points[i - 1]!;
    const p = points[i]!;
    const seconds = (p.at - before.at) / 1000;
    if (seconds <= 0) continue;
    const sent = p.requests >= before.requests ? p.requests - before.requests : p.requests;
    rates.push({ from: before.at, at: p.at, perSecond: sent / seconds, limit: p.limit });
  }
  return rates;
}

export class ProgressSeries {
  readonly #redis: Scripted<'series-add'>;
  readonly #keys: VqbKeys;
  /** Tests pass their clock; production leaves it to Redis TIME. */
  readonly #now: (() => number) | undefined;

  constructor(redis: RedisClient, keys: VqbKeys, now?: () => number) {
    this.#redis = withScripts(redis, ['series-add']);
    this.#keys = keys;
    this.#now = now;
  }

  /** Adds a sample of a running batch unless one was taken within the gap; true when added. */
  async sampleBatch(batch: BatchRef, p: Omit<BatchPoint, 'at'>): Promise<boolean> {
    const values = [p.done, p.failed, p.requests, round(p.limit)].join(',');
    const added = await this.#redis.vqbSeriesAdd(
      this.#keys.batchSeries(batch),
      this.#at(),
      BATCH_GAP_MS,
      BATCH_POINTS / 2,
      BATCH_POINTS,
      BATCH_TTL_MS,
      values,
    );
    return added === 1;
  }

  /** Adds a sample of an account at work unless one was taken within the gap; true when added. */
  async sampleAccount(account: string, p: Omit<AccountPoint, 'at'>): Promise<boolean> {
    const added = await this.#redis.vqbSeriesAdd(
      this.#keys.accountSeries(account),
      this.#at(),
      ACCOUNT_GAP_MS,
      0,
      ACCOUNT_POINTS,
      ACCOUNT_TTL_MS,
      `${p.requests},${round(p.limit)}`,
    );
    return added === 1;
  }

  /** The batch's samples, oldest first (none for a batch nobody sampled while it ran). */
  async batch(batch: BatchRef): Promise<BatchPoint[]> {
    const raw = await this.#redis.lrange(this.#keys.batchSeries(batch), 0, -1);
    return raw.map(numbers).map(([at = 0, done = 0, failed = 0, requests = 0, limit = 0]) => ({
      at,
      done,
      failed,
      requests,
      limit,
    }));
  }

  /** The account's samples since `since` (epoch ms), oldest first. */
  async account(account: string, since = 0): Promise<AccountPoint[]> {
    const raw = await this.#redis.lrange(this.#keys.accountSeries(account), 0, -1);
    return raw
      .map(numbers)
      .map(([at = 0, requests = 0, limit = 0]) => ({ at, requests, limit }))
      .filter((p) => p.at >= since);
  }

  #at(): string {
    return this.#now ? String(Math.round(this.#now())) : '';
  }
}

function numbers(sample: string): number[] {
  return sample.split(',').map(Number);
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
