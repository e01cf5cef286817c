// A batch as its readers see it (`vqb status`, the API, the console, webhooks, retention): its own
// hash (BatchStore) joined with what other stores own of it: the requests it cost (CostLedger), its
// plates in flight (InFlight), its cap and whether the cap holds it (Budget). A query over those
// stores, not a store: it writes nothing and owns no key.
import type { Clock } from '../../clock.js';
import type { Budget } from '../budget.js';
import type { CostLedger } from '../costs.js';
import type { InFlight } from '../inflight.js';
import type { BatchInfo, BatchKey, BatchStore, StoredCounts } from './store.js';

/** The stores a batch's view reads. */
export interface BatchViewSources {
  batches: BatchStore;
  costs: CostLedger;
  inflight: InFlight;
  budget: Budget;
  /** The time a wait for a finish is bounded on. */
  time: Pick<Clock, 'now'>;
}

export interface FinishWait {
  /** How often the batch is read again meanwhile, in case its message was lost to a reconnect. */
  pollMs: number;
  /** Rejects after this long, naming the batch's counts (default: no bound). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export class BatchViews {
  readonly #s: BatchViewSources;

  constructor(sources: BatchViewSources) {
    this.#s = sources;
  }

  /**
   * The batch with its counts, costs and cap; BatchNotFoundError when there is no such batch (or,
   * with `accounts`, none of theirs: another account's batch of that id is not found).
   */
  async get(batch: BatchKey, accounts?: readonly string[]): Promise<BatchInfo> {
    const stored = await this.#s.batches.read(await this.#s.batches.ref(batch, accounts));
    // A pooled batch's plates are in flight with any key of its pool (docs/plans.md).
    const keys = [stored.account, ...(stored.pool?.keys ?? [])];
    const [costs, inflights, budget] = await Promise.all([
      this.#s.costs.forBatch(stored),
      Promise.all(keys.map((key) => this.#s.inflight.forBatch(key, stored.id))),
      this.#s.budget.forBatch(stored),
    ]);
    const inflight = inflights.reduce((a, b) => a + b, 0);
    const counts = { ...stored.counts, ...costs, inflight, queued: 0 } as StoredCounts;
    counts.queued = Math.max(0, counts.enqueued - counts.done - counts.failed - counts.inflight);
    // What the upstream's answers said of their own price, when any did (CostLedger.report).
    const reported = await this.#s.costs.reportedFor(stored);
    return {
      id: stored.id,
      account: stored.account,
      priority: stored.priority,
      weight: stored.weight,
      ...(stored.deadline !== undefined ? { deadline: stored.deadline } : {}),
      ...(stored.atRiskSince !== undefined ? { atRiskSince: stored.atRiskSince } : {}),
      source: stored.source,
      name: stored.name,
      createdAt: stored.createdAt,
      ...(stored.finishedAt !== undefined ? { finishedAt: stored.finishedAt } : {}),
      sealed: stored.sealed,
      metadata: stored.metadata,
      extraColumns: stored.extraColumns,
      product: stored.product,
      counts,
      ...(budget.maxCreates !== undefined ? { maxCreates: budget.maxCreates } : {}),
      reuseWithinMs: stored.reuseWithinMs,
      ...(budget.held ? { blocked: 'budget' } : {}),
      ...(reported ? { reported } : {}),
      ...(stored.callbackUrl !== undefined ? { callbackUrl: stored.callbackUrl } : {}),
      ...(stored.fileName !== undefined ? { fileName: stored.fileName } : {}),
      ...(stored.pool !== undefined ? { pool: stored.pool } : {}),
    };
  }

  /**
   * Resolves with the batch once every plate has an outcome. The finish is heard (the script that
   * finishes a batch publishes it: BatchStore.finishes), not asked for: the batch is read once the
   * subscription stands (a finish that came first), then at each message and every `pollMs`.
   * Rejects on `signal`, or after `timeoutMs` with the counts it stopped at.
   */
  async finished(batch: BatchKey, wait: FinishWait): Promise<BatchInfo> {
    const deadline = wait.timeoutMs === undefined ? Infinity : this.#s.time.now() + wait.timeoutMs;
    const finishes = await this.#s.batches.finishes(batch);
    try {
      for (;;) {
        const info = await this.get(batch);
        if (info.finishedAt !== undefined) return info;
        wait.signal?.throwIfAborted();
        const left = deadline - this.#s.time.now();
        if (left < 0)
          throw new Error(`batch ${info.id} not finished within ${wait.timeoutMs} ms: ${JSON.stringify(info.counts)}`);
        await finishes.next(Math.min(wait.pollMs, left + 1), wait.signal);
      }
    } finally {
      finishes.close();
    }
  }

  /** Newest first; with `accounts`, only the batches of those accounts. */
  async list(offset = 0, limit = 20, accounts?: readonly string[]): Promise<{ total: number; batches: BatchInfo[] }> {
    const { total, refs } = await this.#s.batches.refs(offset, limit, accounts);
    return { total, batches: await Promise.all(refs.map((ref) => this.get(ref))) };
  }
}
