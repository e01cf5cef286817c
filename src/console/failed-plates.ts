// A batch's failed plates as its page shows them, without reading the batch on every page load.
// Counting them by code (queue/rerun.ts failedSummary) reads every outcome of the batch: for a
// 751k-plate batch that was 1,501 HSCANs and 751k outcomes unpacked, 11.6 s, on each load of its
// page (issue 46, 17). The count is kept in Redis (A:console:failed:<id>) with the batch's counts it
// was made at; a page whose batch has not moved since reads that one string. A small batch is
// counted at once, as before; a large one is counted in the background, at most once a gap per
// batch in this process, and its page shows the last count (saying when it was made) or says it
// is counting, until the live updates bring the new one.

import type { Logger } from '../logger.js';
import type { OutcomeStore } from '../queue/batch/outcomes.js';
import { type FailedSummary, failedSummary } from '../queue/rerun.js';
import type { RedisClient } from '../redis/connection.js';
import type { BatchRef, VqbKeys } from '../redis/keys.js';

/** What the page needs of a batch to know whether its stored count still holds. */
export interface FailedOf extends BatchRef {
  /** Its last plate landed (a retry makes it run again). */
  finished?: boolean | undefined;
  /** When it was made: a batch of the same id made again after retention forgot the first is another. */
  createdAt?: string | number | undefined;
  counts: {
    done: number;
    failed: number;
    cancelled?: number | undefined;
    createsSent: number;
    pollsSent: number;
  };
}

/** The failed plates as the page gets them. */
export interface FailedRead {
  /** The count by code; undefined while a large batch's first count is being made. */
  summary?: FailedSummary;
  /** The summary is of the batch as it is now (else it is the last one made, at `at`). */
  current: boolean;
  /** When the summary was made (epoch ms). */
  at?: number;
}

interface Stored {
  version: string;
  at: number;
  summary: FailedSummary;
}

export interface FailedPlatesOptions {
  /** Settled plates up to which a batch is counted during its page load (a few thousand outcomes read). */
  countAtOnceUpTo: number;
  /** A large batch is counted again at most this often, per batch and process. */
  everyMs: number;
  /** How long a stored count is kept after it was made (a batch forgotten by retention leaves it to expire). */
  keepMs: number;
}

export const FAILED_PLATES_DEFAULTS: FailedPlatesOptions = {
  countAtOnceUpTo: 10_000,
  everyMs: 10_000,
  keepMs: 7 * 86_400_000,
};

/** Batches whose last count start this process remembers (the gap between counts). */
const STARTED_KEPT = 10_000;

const NONE: FailedSummary = { total: 0, poll: 0, ask: 0, cancelled: 0, codes: [] };

/**
 * The counts a summary holds for. While a batch runs: its failed and cancelled plates (the requests
 * move all the time; counting again on each would be a full read every gap for nothing). Once it
 * finished, its requests too: a retry sends a create or a poll before its plate can fail again, so
 * the same failed count after a retry from the CLI or the API is another version.
 */
export function failedVersion(batch: Pick<FailedOf, 'counts' | 'finished' | 'createdAt'>): string {
  const { counts } = batch;
  const failed = `${batch.createdAt ?? ''}/${counts.failed}/${counts.cancelled ?? 0}`;
  return batch.finished === true ? `${failed}/${counts.createsSent}/${counts.pollsSent}` : failed;
}

export class FailedPlates {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;
  readonly #outcomes: OutcomeStore;
  readonly #now: () => number;
  readonly #logger: Pick<Logger, 'warn'> | undefined;
  readonly #options: FailedPlatesOptions;
  /** Counts under way in this process, by batch: one at a time each. */
  readonly #counting = new Map<string, Promise<void>>();
  /** When this process last started counting each large batch. */
  readonly #started = new Map<string, number>();

  constructor(
    deps: {
      redis: RedisClient;
      keys: VqbKeys;
      outcomes: OutcomeStore;
      now: () => number;
      logger?: Pick<Logger, 'warn'>;
    },
    options: Partial<FailedPlatesOptions> = {},
  ) {
    this.#redis = deps.redis;
    this.#keys = deps.keys;
    this.#outcomes = deps.outcomes;
    this.#now = deps.now;
    this.#logger = deps.logger;
    this.#options = { ...FAILED_PLATES_DEFAULTS, ...options };
  }

  /** The batch's failed plates: one GET when nothing moved since they were counted. */
  async read(batch: FailedOf): Promise<FailedRead> {
    if (batch.counts.failed === 0) return { summary: NONE, current: true };
    const version = failedVersion(batch);
    const stored = await this.#stored(batch);
    if (stored?.version === version) return { summary: stored.summary, current: true, at: stored.at };
    if (batch.counts.done + batch.counts.failed <= this.#options.countAtOnceUpTo) {
      const made = await this.#count(batch, version);
      return { summary: made.summary, current: true, at: made.at };
    }
    this.#countLater(batch, version);
    return stored ? { summary: stored.summary, current: false, at: stored.at } : { current: false };
  }

  /** Waits for the background count of the batch under way in this process, if any (tests, shutdown). */
  async settle(batch: FailedOf): Promise<void> {
    await this.#counting.get(this.#id(batch));
  }

  /** Drops the stored count (a retry from the console moved the batch's failed plates). */
  async forget(batch: BatchRef): Promise<void> {
    await this.#redis.del(this.#keys.consoleFailed(batch));
  }

  #id(batch: BatchRef): string {
    return `${batch.account} ${batch.id}`;
  }

  async #stored(batch: BatchRef): Promise<Stored | undefined> {
    const raw = await this.#redis.get(this.#keys.consoleFailed(batch));
    if (raw === null) return undefined;
    try {
      return JSON.parse(raw) as Stored;
    } catch {
      return undefined;
    }
  }

  async #count(batch: FailedOf, version: string): Promise<Stored> {
    const at = this.#now();
    const summary = await failedSummary(this.#outcomes, { id: batch.id, account: batch.account });
    const made: Stored = { version, at, summary };
    await this.#redis.set(this.#keys.consoleFailed(batch), JSON.stringify(made), 'PX', this.#options.keepMs);
    return made;
  }

  /** Starts counting a large batch unless a count of it runs or started less than a gap ago. */
  #countLater(batch: FailedOf, version: string): void {
    const id = this.#id(batch);
    if (this.#counting.has(id)) return;
    const now = this.#now();
    if (now - (this.#started.get(id) ?? Number.NEGATIVE_INFINITY) < this.#options.everyMs) return;
    // One entry a batch looked at; a long-lived server forgets them all past a bound.
    if (this.#started.size >= STARTED_KEPT) this.#started.clear();
    this.#started.set(id, now);
    const counting = this.#count(batch, version)
      .then(() => undefined)
      .catch((err: unknown) => {
        // The page keeps showing the last count; the next load tries again.
        this.#logger?.warn({ err, batchId: batch.id }, 'counting the failed plates failed');
      })
      .finally(() => this.#counting.delete(id));
    this.#counting.set(id, counting);
  }
}
