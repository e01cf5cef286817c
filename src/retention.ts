// Retention: Redis holds live batches; the archive folder is the long-term record. A finished
// batch older than VQ_RETAIN (or one whose delete was asked) is archived, the archive is read back
// and checked against what Redis counted, and only then is every Redis key of the batch deleted,
// each by the module that owns it. Nothing paid is deleted without a verified export first.
//
// Cancel (delete --cancel): plates not yet handed to the queue are dropped and never sent upstream
// (each gets a `failed` outcome, code CANCELLED, no charge). Plates already created (paid, being
// polled) and the few already on the account's queue run to the end; the batch is marked for
// deletion and archived, results included, once its last plate lands (by the sweep, or the next
// delete). This module alone names the sweep's lock.

import { randomBytes } from 'node:crypto';
import { clock } from './clock.js';
import { ArchiveError, BatchNotFoundError, BatchRunningError } from './errors.js';
import { jobIdFor } from './queue/account-queues.js';
import { type BatchInfo, type BatchKey, fileNameOf } from './queue/batch/store.js';
import { CANCELLED_CODE } from './queue/rerun.js';
import { lentId } from './queue/scheduler.js';
import type { BatchRef } from './redis/keys.js';
import { type Scripted, withScripts } from './redis/scripts.js';
import type { QueueServices } from './services.js';
import type { ArchiveExpectation, ArchiveFile, ArchiveManifest, BatchArchive } from './sinks/archive.js';
import { batchExportSource } from './sinks/batch-source.js';
import type { DeliveryRecord } from './webhooks/deliveries.js';

export type RetentionServices = Pick<
  QueueServices,
  | 'redis'
  | 'keys'
  | 'accounts'
  | 'batches'
  | 'batchViews'
  | 'outcomes'
  | 'scheduler'
  | 'costs'
  | 'budget'
  | 'inflight'
  | 'webhooks'
>;

export interface RetentionLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface RetentionOptions {
  /** Finished batches older than this are pruned by the sweep (0: only those whose delete was asked). */
  retainMs: number;
  now?: () => number;
  logger?: RetentionLogger;
}

export interface PruneCandidate {
  batchId: string;
  account: string;
  finishedAt: number;
  /** retention: older than the limit; delete: a delete (with cancel) was asked. */
  reason: 'retention' | 'delete';
  rows: number;
  plates: number;
  /** Redis bytes its rows, outcomes and hash take (an estimate: MEMORY USAGE, sampled). */
  bytes: number;
}

export interface ArchivedBatch {
  batchId: string;
  folder: string;
  files: ArchiveFile[];
  archivedAt: number;
}

export type DeleteResult =
  | ({ state: 'archived'; alreadyArchived: boolean } & ArchivedBatch)
  | { state: 'cancelling'; batchId: string; dropped: number; running: number };

export interface PruneResult {
  dryRun: boolean;
  candidates: PruneCandidate[];
  archived: ArchivedBatch[];
  failed: { batchId: string; code: string; message: string }[];
}

const LOCK_MS = 10 * 60_000;
const CHUNK = 500;
const CANCELLED = {
  code: CANCELLED_CODE,
  message: 'cancelled before it was sent upstream (delete --cancel); not charged',
};

export class Retention {
  readonly #s: RetentionServices;
  readonly #archive: BatchArchive;
  readonly #redis: Scripted<'lock-release'>;
  readonly #retainMs: number;
  readonly #now: () => number;
  readonly #logger: RetentionLogger | undefined;

  constructor(services: RetentionServices, archive: BatchArchive, options: RetentionOptions) {
    this.#s = services;
    this.#archive = archive;
    this.#redis = withScripts(services.redis, ['lock-release']);
    this.#retainMs = options.retainMs;
    this.#now = options.now ?? clock.now;
    this.#logger = options.logger;
  }

  get archive(): BatchArchive {
    return this.#archive;
  }

  /**
   * Finished batches finished at least `olderThanMs` ago, and finished ones whose delete was asked.
   * A running batch is never one.
   */
  async candidates(olderThanMs: number | undefined): Promise<PruneCandidate[]> {
    const cutoff = olderThanMs === undefined ? Number.NEGATIVE_INFINITY : this.#now() - olderThanMs;
    const out: PruneCandidate[] = [];
    for (const c of await this.#s.batches.retentionCandidates()) {
      if (c.finishedAt === undefined) continue;
      const reason = c.deleteRequested ? 'delete' : c.finishedAt <= cutoff ? 'retention' : undefined;
      if (reason === undefined) continue;
      const ref = { id: c.id, account: c.account };
      const info = await this.#s.batchViews.get(ref).catch(() => undefined);
      if (info === undefined || (await this.#deliveriesPending(ref))) continue;
      const bytes = await this.#s.batches.memoryUsage(ref);
      out.push({
        batchId: c.id,
        account: c.account,
        finishedAt: c.finishedAt,
        reason,
        rows: info.counts.total,
        plates: info.counts.enqueued,
        bytes,
      });
    }
    return out;
  }

  /**
   * `vqb prune`: archives and deletes every candidate (or, dry, only lists them). One failure does
   * not stop the others.
   */
  async prune(options: { olderThanMs: number | undefined; dryRun?: boolean }): Promise<PruneResult> {
    const candidates = await this.candidates(options.olderThanMs);
    const result: PruneResult = { dryRun: options.dryRun === true, candidates, archived: [], failed: [] };
    if (options.dryRun) return result;
    for (const c of candidates) {
      try {
        result.archived.push(await this.archiveAndForget({ id: c.batchId, account: c.account }));
      } catch (err) {
        const e = err as { code?: string; message?: string };
        result.failed.push({ batchId: c.batchId, code: e.code ?? 'INTERNAL', message: e.message ?? String(err) });
        this.#logger?.warn(
          { batchId: c.batchId, code: e.code, err: e.message },
          'batch not pruned; nothing of it deleted',
        );
      }
    }
    return result;
  }

  /**
   * The workers' periodic pass: one process at a time (a lock in Redis), finished batches older
   * than VQ_RETAIN and those whose delete was asked. Undefined when another process holds the lock.
   */
  async sweep(): Promise<PruneResult | undefined> {
    const lock = this.#s.keys.retentionLock;
    const token = randomBytes(8).toString('hex');
    if ((await this.#redis.set(lock, token, 'PX', LOCK_MS, 'NX')) !== 'OK') return undefined;
    try {
      return await this.prune({ olderThanMs: this.#retainMs > 0 ? this.#retainMs : undefined });
    } finally {
      await this.#redis.vqbLockRelease(lock, token);
    }
  }

  /** `vqb delete`, `DELETE /v1/batches/:id`: refused while the batch runs, unless cancel. */
  async delete(batch: BatchKey, options: { cancel?: boolean } = {}): Promise<DeleteResult> {
    if (!(await this.#s.batches.exists(batch))) {
      const manifest =
        typeof batch === 'string'
          ? await this.#archive.manifest(batch)
          : await this.#archive.manifestFor(batch.id, [batch.account]);
      if (manifest === undefined) throw new BatchNotFoundError(typeof batch === 'string' ? batch : batch.id);
      return { state: 'archived', alreadyArchived: true, ...archived(this.#archive, manifest) };
    }
    const info = await this.#s.batchViews.get(batch);
    const batchId = info.id;
    if (info.finishedAt === undefined) {
      if (!options.cancel)
        throw new BatchRunningError(
          batchId,
          `${remaining(info)} of ${info.counts.enqueued} plates have no outcome yet`,
        );
      const cancelled = await this.cancel(info);
      if (cancelled.running > 0) return { state: 'cancelling', batchId, ...cancelled };
    }
    return { state: 'archived', alreadyArchived: false, ...(await this.archiveAndForget(info)) };
  }

  /**
   * Stops a running batch: its plates never sent upstream (still in the scheduler, or jobs that
   * never sent their create) get a CANCELLED outcome (never charged); created ones run on. With
   * none created, the batch finishes here. The batch is marked so that it is archived and
   * deleted as soon as it finishes. Returns the plates dropped and those still running.
   */
  async cancel(batch: BatchKey): Promise<{ dropped: number; running: number }> {
    const info = await this.#s.batchViews.get(batch);
    const batchId = info.id;
    if (info.finishedAt !== undefined) return { dropped: 0, running: 0 };
    if (!info.sealed)
      throw new BatchRunningError(batchId, 'its rows are still being stored; cancel once the ingest has ended');
    await this.#s.batches.requestDelete(info);
    const plates = [...(await this.#s.scheduler.drop(info.account, batchId)), ...(await this.#dropUnsentJobs(batchId))];
    const now = this.#now();
    let recorded = 0;
    for (let i = 0; i < plates.length; i += CHUNK) {
      const results = await Promise.all(
        plates.slice(i, i + CHUNK).map((plate) =>
          this.#s.outcomes.record(info.account, {
            batchId,
            plate,
            status: 'failed',
            error: { ...CANCELLED },
            finishedAt: now,
            requests: 0,
            polls: 0,
            attempts: 0,
          }),
        ),
      );
      recorded += results.filter((r) => r !== 'exists').length;
    }
    // Counted apart: `vqb status`, the console and the exports call these plates cancelled, not failed.
    await this.#s.batches.countCancelled(info, recorded);
    const after = await this.#s.batchViews.get(info);
    const running = after.finishedAt === undefined ? remaining(after) : 0;
    this.#logger?.info(
      { batchId, dropped: plates.length, running },
      'batch cancelled: unsent plates dropped, created ones run to the end',
    );
    return { dropped: plates.length, running };
  }

  /**
   * The batch's jobs that were fed to a queue and never sent a create (step `create`: waiting, or
   * asleep at a spending cap or for an in-flight slot) are removed, and their plates returned: they
   * are as unsent as the plates still in the scheduler. A job a worker holds (locked) may be
   * sending right now and is left to run; `creating` and `poll` jobs were (or may have been) paid.
   */
  async #dropUnsentJobs(batchId: string): Promise<string[]> {
    const plates: string[] = [];
    // Every queue: a pooled batch's plates run on the queues of the pool's keys.
    for (const queue of this.#s.accounts.queues()) {
      const jobs = await queue.getJobs(['wait', 'prioritized', 'delayed']);
      for (const job of jobs) {
        if (job?.data.batchId !== batchId || job.data.step !== 'create') continue;
        // Refused (the job was taken meanwhile): it runs on, and is counted as running.
        if (
          await job.remove().then(
            () => true,
            () => false,
          )
        )
          plates.push(job.data.plate);
      }
    }
    return plates;
  }

  /**
   * Archive → verify → forget, for one finished batch. Throws BatchRunningError for a batch still
   * running, ArchiveError (nothing deleted) when the archive cannot be written or read back.
   */
  async archiveAndForget(batch: BatchKey): Promise<ArchivedBatch> {
    const info = await this.#s.batchViews.get(batch);
    const batchId = info.id;
    if (info.finishedAt === undefined)
      throw new BatchRunningError(batchId, `${remaining(info)} of ${info.counts.enqueued} plates have no outcome yet`);
    const expected = {
      rows: info.counts.total,
      outcomes: info.counts.done + info.counts.failed,
      rejected: info.counts.rejected,
    };
    // A webhook still being attempted writes its delivery record after each try: wait until it is settled.
    const webhooks = await this.#s.webhooks.deliveries.list(info);
    if (webhooks.some(unsettled))
      throw new BatchRunningError(batchId, 'its batch.finished webhook is still being delivered');
    // An archive of this very state may exist: a prune that crashed part-way through forgetting
    // (its outcomes may be gone already). It is kept when it still reads back right; rewriting it
    // from a half-deleted batch would replace a good archive with a bad one.
    let manifest = await this.#reusable(info, expected);
    if (manifest === undefined) {
      // Written under a temporary name, renamed into place, then read back (verify) before anything is deleted.
      manifest = await this.#archive.write(
        await batchExportSource(this.#s.batches, this.#s.outcomes, info),
        info,
        expected,
        webhooks,
      );
    }
    // A `vqb retry` between the read and now would have changed the outcomes: keep everything, try later.
    const now = await this.#s.batchViews.get(info);
    if (
      now.finishedAt === undefined ||
      now.counts.done !== info.counts.done ||
      now.counts.failed !== info.counts.failed ||
      now.counts.total !== info.counts.total
    ) {
      throw new ArchiveError(
        batchId,
        'the batch changed while it was archived (a retry?); run prune again once it has finished',
      );
    }
    await this.#forget(info);
    this.#logger?.info(
      { batchId, folder: this.#archive.folder(fileNameOf(info)), files: manifest.files.length, rows: expected.rows },
      'batch archived and deleted from Redis',
    );
    return archived(this.#archive, manifest);
  }

  async #deliveriesPending(batch: BatchRef): Promise<boolean> {
    return (await this.#s.webhooks.deliveries.list(batch)).some(unsettled);
  }

  async #reusable(info: BatchInfo, expected: ArchiveExpectation): Promise<ArchiveManifest | undefined> {
    const existing = await this.#archive.manifest(fileNameOf(info)).catch(() => undefined);
    if (existing === undefined) return undefined;
    const was = existing.batch;
    const same =
      was.finishedAt === info.finishedAt &&
      (['total', 'done', 'failed', 'rejected'] as const).every((k) => was.counts[k] === info.counts[k]);
    return same ? this.#archive.verify(fileNameOf(info), expected).catch(() => undefined) : undefined;
  }

  /**
   * Every Redis key of the batch, each removed by its owner; the batch's entry last, so a crash
   * part-way leaves it listed and the next prune finishes the job.
   */
  async #forget(info: BatchInfo): Promise<void> {
    const { id, account } = info;
    // A pooled batch's jobs may be on any key of its pool (docs/plans.md).
    const keys = [account, ...(info.pool?.keys ?? [])];
    const queues = keys.map((key) => this.#s.accounts.queue(key));
    let plates: string[] = [];
    const removeJobs = async () => {
      await Promise.all(plates.flatMap((plate) => queues.map((queue) => queue.remove(jobIdFor(id, plate)))));
      plates = [];
    };
    for await (const row of this.#s.batches.rows(info)) {
      if (row.kind !== 'queued') continue;
      plates.push(row.plate);
      if (plates.length >= CHUNK) await removeJobs();
    }
    await removeJobs();
    await this.#s.scheduler.forget(account, id);
    for (const key of info.pool?.keys ?? []) {
      await this.#s.scheduler.forget(key, lentId(id, account));
      await this.#s.inflight.forget(key, id);
    }
    await this.#s.inflight.forget(account, id);
    await this.#s.costs.forget(info);
    await this.#s.budget.forget(info);
    await this.#s.webhooks.deliveries.forget(info);
    await this.#s.outcomes.forget(info);
    await this.#s.batches.forget(info);
  }
}

/** A delivery still being attempted: it writes its record again after each try. */
function unsettled(delivery: DeliveryRecord): boolean {
  return delivery.state === 'pending' || delivery.state === 'retrying';
}

function remaining(info: BatchInfo): number {
  return Math.max(0, info.counts.enqueued - info.counts.done - info.counts.failed);
}

function archived(archive: BatchArchive, manifest: ArchiveManifest): ArchivedBatch {
  return {
    batchId: manifest.batchId,
    folder: archive.folder(manifest.fileName ?? manifest.batchId),
    files: manifest.files,
    archivedAt: manifest.archivedAt,
  };
}

/** The sweep on a timer, in worker processes: at start, then every `everyMs`. */
export function startRetentionSweep(
  retention: Retention,
  options: {
    everyMs: number;
    logger: RetentionLogger & { error(obj: object, msg: string): void };
    /**
     * The process's Redis health: a sweep failing because Redis is away is that outage's one line,
     * not a line per tick.
     */
    health?: { outage(err: unknown): boolean };
  },
): { stop(): void } {
  let running = false;
  const tick = () => {
    if (running) return;
    running = true;
    retention
      .sweep()
      .catch((err: unknown) => {
        if (!options.health?.outage(err)) options.logger.error({ err }, 'retention sweep failed');
      })
      .finally(() => {
        running = false;
      });
  };
  tick();
  const timer = clock.setInterval(tick, options.everyMs);
  timer.unref();
  return { stop: () => clock.clearTimeout(timer) };
}

/** How often the sweep runs for a given VQ_RETAIN: a quarter of it, between a second and an hour. */
export function sweepInterval(retainMs: number): number {
  return retainMs <= 0 ? 3_600_000 : Math.max(1_000, Math.min(3_600_000, Math.floor(retainMs / 4)));
}
