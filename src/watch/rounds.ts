// A watch's rounds: start one when its schedule fires, and compare its results when its batch is
// done. A round is a batch of the watch's plates through the one enqueue path (bulk, reuse off,
// id `watch-<name>-<n>`, so a start retried after a crash resumes the same batch and pays no plate
// twice). Rounds never overlap: a round due while the last is still running is said (log, state,
// reason) and waits for it or is skipped, as the watch says. A month budget bounds the creates:
// a round that would pass it holds at it (the batch's own create cap, the spending caps' rule),
// and raising the budget lets it go on.
//
// Closing a round (once, under a lock, by whichever process sees its batch done first): each
// plate's result is flattened and compared with its last known one, field by field; the changes
// are kept (per round, and a short history per plate), written as a file beside the batch's full
// export, and sent as signed webhooks (`plate.changed` per plate, or one `watch.round_finished`).
import { join } from 'node:path';
import type { Logger } from 'pino';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import { enqueue } from '../producers/enqueue.js';
import { utcMonth } from '../queue/costs.js';
import type { QueueServices } from '../services.js';
import { exportBatch, fileSinkFor } from '../sinks/export.js';
import { zonedText } from '../time-text.js';
import { messageId } from '../webhooks/events.js';
import { writeChangesFile } from './changes-export.js';
import { compare, type Flat, flatten } from './diff.js';
import { nextOpening, windowOpen, windowText } from './schedule.js';
import type { WatchSchedules } from './schedules.js';
import type { ChangeLine, LastResult, RoundRecord, Watch, WatchRef, WatchStore } from './store.js';

export interface RoundsDeps {
  services: Omit<QueueServices, 'close'>;
  store: WatchStore;
  schedules: WatchSchedules;
  logger: Logger;
  now?: () => number;
}

/** What a fired round did, for the caller's log and the tests. */
export type FireOutcome =
  | 'started'
  | 'resumed'
  | 'overlap'
  | 'skipped'
  | 'held'
  | 'window'
  | 'paused'
  | 'gone'
  | 'empty'
  /** Another process started the round first (two jobs came due at once): nothing more to do. */
  | 'raced';

/** How long one process may take to close a round before another may try. */
const CLOSE_LOCK_MS = 120_000;

export function roundBatchId(name: string, round: number): string {
  return `watch-${name}-${round}`;
}

export class Rounds {
  readonly #d: RoundsDeps;
  readonly #config: Config;
  readonly #now: () => number;

  constructor(deps: RoundsDeps) {
    this.#d = deps;
    this.#config = deps.services.config;
    this.#now = deps.now ?? clock.now;
  }

  /** The schedule (or a one-off job `jobId`) says a round is due. */
  async fire(ref: WatchRef, jobId: string): Promise<FireOutcome> {
    const { store } = this.#d;
    const w = await store.get(ref);
    if (w === undefined) return 'gone';
    if (w.paused) return 'paused';
    const log = this.#d.logger.child({ watch: w.name, account: w.account });
    // The job that started the open round, retried (its process died): enqueue again, which
    // resumes the same batch (its id is the round's) and pays for nothing twice.
    if (w.lastJob === jobId && w.open !== undefined) {
      await this.#enqueue(w, w.open, await this.#cap(w));
      return 'resumed';
    }
    const now = this.#now();
    if (w.window !== undefined && !windowOpen(w.window, now)) {
      const opens = nextOpening(w.window, now);
      await store.set(ref, {
        state: w.open === undefined ? 'window' : w.state,
        due: true,
        // Read by a person (`vqb watch`, the console): on the clock of VQ_TIME_ZONE, named.
        reason:
          `due, waits for its window ${windowText(w.window)} UTC ` +
          `(opens ${zonedText(opens, this.#config.timeZone)})`,
      });
      await this.#d.schedules.once(ref, `window-${opens}`, opens);
      log.info({ opensAt: new Date(opens).toISOString() }, 'watch round due outside its window: waits for it');
      return 'window';
    }
    if (w.open !== undefined && !(await this.close(ref, w.open))) {
      const at = zonedText(now, this.#config.timeZone, now);
      const message = `round ${w.open} still running when round ${w.open + 1} came due at ${at}`;
      if (w.overlap === 'skip') {
        await store.bumpSkipped(ref);
        await store.set(ref, { state: 'overlap', reason: `${message}: that round was skipped` });
        log.warn({ round: w.open }, `${message}: skipped (overlap skip)`);
        return 'skipped';
      }
      await store.set(ref, { state: 'overlap', due: true, reason: `${message}: it starts when round ${w.open} ends` });
      log.warn({ round: w.open }, `${message}: the next waits for it (overlap wait)`);
      return 'overlap';
    }
    return this.#start(ref, jobId, log);
  }

  /** Creates the month budget still allows (undefined: no budget). */
  async #cap(w: Watch): Promise<number | undefined> {
    if (w.perMonth === undefined) return undefined;
    return Math.max(0, w.perMonth - (await this.#d.store.spent(w, utcMonth(this.#now()))));
  }

  async #start(ref: WatchRef, jobId: string, log: Logger): Promise<FireOutcome> {
    const { store } = this.#d;
    const w = await store.get(ref);
    if (w === undefined) return 'gone';
    // Read again: a pause that came while `fire` closed the last round (a CI run saw round 4 start
    // after `vqb watch pause` had answered) starts nothing.
    if (w.paused) return 'paused';
    if (w.plates === 0) {
      await store.set(ref, { state: 'idle', due: null, reason: 'no plates to watch' });
      return 'empty';
    }
    const cap = await this.#cap(w);
    if (cap === 0) {
      const month = new Date(this.#now()).toISOString().slice(0, 7);
      const reason = `held at its month budget of ${w.perMonth} creates (${month}, UTC); ` + raiseHint(w.name);
      await store.set(ref, { state: 'held', due: true, reason });
      log.warn({ code: 'WATCH_BUDGET', perMonth: w.perMonth }, reason);
      return 'held';
    }
    const n = w.round + 1;
    const batchId = roundBatchId(w.name, n);
    const short = cap !== undefined && cap < w.plates;
    // Said before the batch exists: a start retried after a crash finds its round and resumes it.
    // One step with the check that no pause (and no other process's start) came since the read.
    const started = await store.startRound(
      ref,
      w.round,
      { round: n, batchId, plates: w.plates, startedAt: this.#now() },
      {
        round: n,
        open: n,
        due: null,
        lastJob: jobId,
        state: short ? 'held' : 'running',
        reason: short
          ? `round ${n} holds at the month budget: ${cap} of ${w.plates} plates can be paid; ${raiseHint(w.name)}`
          : null,
      },
    );
    if (!started) {
      const now = await store.get(ref);
      return now === undefined ? 'gone' : now.paused ? 'paused' : 'raced';
    }
    await this.#enqueue({ ...w, round: n }, n, cap);
    log.info({ round: n, batchId, plates: w.plates, ...(short ? { cap } : {}) }, 'watch round started');
    return 'started';
  }

  async #enqueue(w: Watch, n: number, cap: number | undefined): Promise<void> {
    const plates = await this.#d.store.plates(w);
    await enqueue(
      this.#d.services as QueueServices,
      { source: 'watch', name: `watch-${w.name}`, plates: plates.map((plate) => ({ plate })) },
      {
        batchId: roundBatchId(w.name, n),
        account: w.account,
        ...(w.pool !== undefined ? { pool: w.pool } : {}),
        priority: 'bulk',
        reuseWithinMs: 0,
        metadata: { watch: w.name, round: n },
        ...(cap !== undefined ? { maxCreates: cap } : {}),
      },
    );
  }

  /**
   * Compares round `n` when its batch is done; true when the round is closed (now or before),
   * false while its batch runs (or another process is closing it).
   */
  async close(ref: WatchRef, n: number): Promise<boolean> {
    const { store, services } = this.#d;
    const record = await store.round(ref, n);
    if (record === undefined || record.closedAt !== undefined) return true;
    const batch = { id: record.batchId, account: ref.account };
    if (!(await services.batches.exists(batch))) return false;
    const info = await services.batchViews.get(batch);
    if (info.finishedAt === undefined) return false;
    if (!(await store.lockClose(ref, n, CLOSE_LOCK_MS))) return false;
    try {
      const w = await store.get(ref);
      if (w === undefined) return true;
      await this.#compare(w, record, info.counts.creates, info.counts.failed);
      return true;
    } finally {
      await store.unlockClose(ref, n);
    }
  }

  async #compare(w: Watch, record: RoundRecord, creates: number, failed: number): Promise<void> {
    const { store } = this.#d;
    const ref: WatchRef = w;
    const ignore = new Set([...this.#config.watch.ignore, ...w.ignore]);
    const now = this.#now();
    const at = new Date(now).toISOString();
    const changes =
      w.compared >= record.round
        ? await store.changes(ref, record.round)
        : await this.#diff(w, record, { ignore, now, at, creates });
    const changed = [...new Set(changes.map((c) => c.plate))];
    const exportPath = await this.#export(w, record, changes);
    await this.#notify(w, record, changes, changed, at);
    await store.putRound(ref, {
      ...record,
      closedAt: now,
      changedPlates: changed.length,
      changes: changes.length,
      firstRecord: record.round === 1,
      creates,
      failed,
      ...(exportPath !== undefined ? { export: exportPath } : {}),
    });
    const after = await store.get(ref);
    await store.set(ref, {
      open: null,
      state: after?.paused ? 'paused' : 'idle',
      reason: after?.due ? 'the round that came due meanwhile starts now' : null,
    });
    await store.forgetRemoved(ref, now - this.#config.watch.forgetMs);
    await store.dropOldChanges(ref, record.round, this.#config.watch.keepRounds);
    this.#d.logger.info(
      {
        watch: w.name,
        account: w.account,
        round: record.round,
        changedPlates: changed.length,
        changes: changes.length,
      },
      'watch round compared',
    );
    if (after?.due && !after.paused) await this.#d.schedules.once(ref, `after-${record.round}`);
  }

  /** Each plate's result against its last known one; kept with the round (store.recordRound). */
  async #diff(
    w: Watch,
    record: RoundRecord,
    o: { ignore: ReadonlySet<string>; now: number; at: string; creates: number },
  ): Promise<ChangeLine[]> {
    const { store, services } = this.#d;
    const fresh = new Map<string, Flat>();
    for await (const outcome of services.outcomes.scan({ id: record.batchId, account: w.account }))
      if (outcome.status === 'done' && outcome.result !== undefined)
        fresh.set(outcome.plate, flatten(outcome.result, o.ignore));
    const plates = [...fresh.keys()];
    const known = await store.lastResults(w, plates);
    const last = new Map<string, LastResult>();
    const changes: ChangeLine[] = [];
    plates.forEach((plate, i) => {
      const fields = fresh.get(plate)!;
      last.set(plate, { round: record.round, at: o.now, fields });
      const before = known[i];
      // A plate's first result is recorded only: the first round, a plate added since.
      if (before === undefined) return;
      for (const c of compare(before.fields, fields)) changes.push({ round: record.round, plate, ...c, at: o.at });
    });
    const spend = { month: utcMonth(record.startedAt), creates: o.creates };
    await store.recordRound(w, record.round, last, changes, this.#config.watch.history, spend);
    return changes;
  }

  /** The full export and the changes export, side by side in VQ_OUT_DIR; a failure is logged, not fatal. */
  async #export(w: Watch, record: RoundRecord, changes: readonly ChangeLine[]): Promise<string | undefined> {
    const { services } = this.#d;
    try {
      const batch = { id: record.batchId, account: w.account };
      await exportBatch(services, fileSinkFor(this.#config), batch, [w.format]);
      const path = join(this.#config.outDir, `${record.batchId}.changes.${w.format}`);
      await writeChangesFile(path, changes, w.format, this.#config.csvDelimiter);
      return path;
    } catch (err) {
      this.#d.logger.error({ err, watch: w.name, round: record.round }, 'could not write the round exports');
      return undefined;
    }
  }

  async #notify(
    w: Watch,
    record: RoundRecord,
    changes: readonly ChangeLine[],
    changed: readonly string[],
    at: string,
  ): Promise<void> {
    const url = w.callbackUrl ?? this.#config.webhooks.url;
    if (url === undefined || this.#config.webhooks.secret === undefined || changes.length === 0) return;
    const batch = { id: record.batchId, account: w.account };
    const base = { watch: w.name, account: w.account, round: record.round, batchId: record.batchId };
    const strip = (c: ChangeLine) => ({ field: c.field, before: c.before, after: c.after });
    const { webhooks } = this.#d.services;
    if (w.notify === 'round') {
      const id = messageId('watch.round_finished', w.account, w.name, String(record.round), url);
      const data = { ...base, plates: record.plates, changedPlates: changed.length, changes: changes.map(lineOf) };
      await webhooks.emit(id, { type: 'watch.round_finished', timestamp: at, data }, url, batch);
      return;
    }
    for (const plate of changed) {
      const id = messageId('plate.changed', w.account, w.name, String(record.round), plate, url);
      const data = { ...base, plate, at, changes: changes.filter((c) => c.plate === plate).map(strip) };
      await webhooks.emit(id, { type: 'plate.changed', timestamp: at, data }, url, batch);
    }
  }

  /** Closes every open round whose batch is done (the sweep every worker process runs). */
  async sweep(): Promise<number> {
    let closed = 0;
    for (const ref of await this.#d.store.all()) {
      const w = await this.#d.store.get(ref);
      if (w?.open === undefined) continue;
      try {
        if (await this.close(ref, w.open)) closed += 1;
      } catch (err) {
        this.#d.logger.error({ err, watch: ref.name, account: ref.account }, 'could not compare a watch round');
      }
    }
    return closed;
  }
}

function raiseHint(name: string): string {
  return `raise it with \`vqb watch budget ${name} --per-month N\``;
}

function lineOf(c: ChangeLine): Record<string, unknown> {
  return { plate: c.plate, field: c.field, before: c.before, after: c.after };
}
