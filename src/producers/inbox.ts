// The drop folder: operators drop CSV files into <VQ_ROOT>/inbox/, each becomes a batch, and its
// exports come back in <VQ_ROOT>/outbox/ once every plate has an outcome. Polling (readdir +
// lstat every VQ_INBOX_POLL), no file-system events, so it works the same on Docker volumes and
// network shares.
//
//   inbox/       drop files here: .csv, .txt or .tsv (any case); other extensions go to failed/
//   processing/  a taken file while it is hashed and ingested (left here by a crash: resumed)
//   archive/     ingested files, as YYYYMMDD-HHMMSS-<name> (UTC time of archiving)
//   failed/      files that could not be read, each with <name>.error.txt saying why and what to do
//   outbox/      <batch>.csv, <batch>.jsonl, <batch>.rejects.csv, written when the batch finishes
//
// Naming conventions:
// - A file is taken once its size and modification time have not changed for VQ_INBOX_STABLE.
//   To have it taken at once, write it as `name.csv.part` and rename it to `name.csv` when
//   complete. Files ending in `.part` and dotfiles (`.name.csv`, what rsync and many editors
//   write) are never taken. Links, folders, sockets and FIFOs are skipped (logged once).
// - The batch id is `<name>-<12 hex of the content's sha256>`: the same file (same name, same
//   bytes) dropped again is the same batch and nothing is paid again; it is archived, and its
//   exports are written to outbox/ again when the batch is finished.
// - A name containing `.force.` or starting with `force-` (any case), e.g. `frota.force.csv` or
//   `force-frota.csv`, always starts a new batch: every plate is paid again.
// - A name already taken in processing/, archive/ or failed/ gets `~2`, `~3`, … before its
//   extension; nothing is overwritten. Over-long names are shortened to fit.
//
// Every file is read in full (hashed and checked as CSV) before anything is queued, so a file
// that turns out to be unreadable halfway costs nothing. Run one watcher per VQ_ROOT.
import { lstat, readdir } from 'node:fs/promises';
import type { Config } from '../config.js';
import { isVqbError, type VqbError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { QueueServices } from '../queue/services.js';
import { exportBatch, fileSinkFor } from '../sinks/export.js';
import { checkCsv, readPlateCsv } from './csv.js';
import { ensureLayout, errorReport, fileChunks, hasInboxExtension, isForceName, moveInto, pathIn, stamp, writeErrorReport, type InboxLayout } from './inbox-files.js';
import { InboxObserver } from './inbox-stable.js';
import { batchIdFor, ingest } from './ingest.js';

export { INBOX_DIRS, INBOX_EXTENSIONS, isForceName } from './inbox-files.js';

export interface InboxWatcherDeps {
  services: QueueServices;
  config: Config;
  logger: Logger;
  now?: () => number;
}

export interface InboxStatus {
  running: boolean;
  scanning: boolean;
  lastScanAt?: number;
  /** Files in inbox/ seen and waiting to be stable. */
  waiting: number;
  /** Batches whose exports are written when they finish (as of the last scan). */
  pendingExports: number;
  taken: number;
  failed: number;
  exported: number;
  lastError?: string;
}

export interface InboxWatcher {
  /** Scans every `config.inbox.pollMs` until stop(). */
  start(): void;
  /** Stops scanning; waits for the file or export in progress. */
  stop(): Promise<void>;
  /** One pass: resume processing/, take stable files from inbox/, export finished batches. */
  scanOnce(): Promise<void>;
  status(): InboxStatus;
}

/** What Redis remembers about a file in processing/, so a restart keeps its name and batch id. */
interface ProcessingRecord {
  name: string;
  ino: string;
  digest?: string;
  batchId?: string;
}

export function createInboxWatcher(deps: InboxWatcherDeps): InboxWatcher {
  const { services, config } = deps;
  const now = deps.now ?? Date.now;
  const log = deps.logger.child({ component: 'inbox' });
  const pendingKey = `${services.keys.base}:inbox:pending`;
  const processingKey = `${services.keys.base}:inbox:processing`;

  const observer = new InboxObserver({ stableMs: config.inbox.stableMs, log });
  const errors = new Map<string, string>();
  const counts = { taken: 0, failed: 0, exported: 0 };
  let tail: Promise<void> = Promise.resolve();
  let running = false;
  let stopping = false;
  let scanning = false;
  let timer: NodeJS.Timeout | undefined;
  let lastScanAt: number | undefined;
  let lastError: string | undefined;
  let pendingExports = 0;

  /** Logs a repeated failure once until it changes or clears, not on every poll. */
  function reportError(key: string, err: unknown, fields: Record<string, unknown>): void {
    const message = err instanceof Error ? err.message : String(err);
    lastError = message;
    if (errors.get(key) === message) return;
    errors.set(key, message);
    log.error({ ...fields, err }, `inbox: ${message} (will retry)`);
  }

  async function scan(): Promise<void> {
    scanning = true;
    try {
      const layout = await ensureLayout(config.root);
      await resumeProcessing(layout);
      await takeFromInbox(layout);
      await exportFinished(layout);
      lastScanAt = now();
    } finally {
      scanning = false;
    }
  }

  async function resumeProcessing(layout: InboxLayout): Promise<void> {
    const names = (await readdir(layout.dirs.processing)).filter((n) => !n.startsWith('.'));
    // Records whose file is gone belong to files that were archived or failed just before a crash.
    const stale = (await services.redis.hkeys(processingKey)).filter((k) => !names.includes(k));
    if (stale.length > 0) await services.redis.hdel(processingKey, ...stale);
    for (const name of names) {
      if (stopping) return;
      if (!errors.has(`processing:${name}`)) log.info({ file: name }, `inbox: resuming ${JSON.stringify(name)}, left in processing/`);
      await processFile(layout, name);
    }
  }

  async function takeFromInbox(layout: InboxLayout): Promise<void> {
    for (const file of await observer.ready(layout, now())) {
      if (stopping) return;
      observer.forget(file.name);
      await take(layout, file.name, file.path, file.ino);
    }
  }

  async function take(layout: InboxLayout, name: string, path: string, ino: bigint): Promise<void> {
    try {
      if (!hasInboxExtension(name)) {
        await fail(layout, path, name, 'INBOX_UNSUPPORTED_TYPE', `the extension of "${name}" is not one of .csv, .txt, .tsv`);
        return;
      }
      // The record is written before the move, so a crash right after it still knows the name
      // (processing/ may hold it as `name~2.csv`).
      const moved = await moveInto(layout, path, 'processing', name, {
        async beforeRename(target: string) {
          const record: ProcessingRecord = { name, ino: String(ino) };
          await services.redis.hset(processingKey, target, JSON.stringify(record));
        },
      });
      counts.taken++;
      errors.delete(`inbox:${name}`);
      log.info({ file: name, processing: moved }, `inbox: taken ${JSON.stringify(name)}`);
      await processFile(layout, moved);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !(await exists(path))) return; // removed meanwhile
      reportError(`inbox:${name}`, err, { file: name });
    }
  }

  /** Hash and check, ingest (or find the batch), remember it for export, archive. */
  async function processFile(layout: InboxLayout, procName: string): Promise<void> {
    const path = pathIn(layout, 'processing', procName);
    let name = procName;
    try {
      const raw = await services.redis.hget(processingKey, procName);
      const record = raw === null ? undefined : (JSON.parse(raw) as ProcessingRecord);
      const st = await lstat(path, { bigint: true });
      // A record about another file (same processing name, other inode) is stale: ignored.
      const known = record !== undefined && record.ino === String(st.ino) ? record : undefined;
      name = known?.name ?? procName;

      let digest: string;
      try {
        digest = await checkFile(path);
      } catch (err) {
        if (!isInputError(err)) throw err;
        await fail(layout, path, name, err.code, err.message);
        await services.redis.hdel(processingKey, procName);
        return;
      }
      const batchId = known?.digest === digest && known.batchId !== undefined ? known.batchId : batchIdFor(name, digest, isForceName(name));
      const next: ProcessingRecord = { name, ino: String(st.ino), digest, batchId };
      await services.redis.hset(processingKey, procName, JSON.stringify(next));

      const existing = (await services.batches.exists(batchId)) ? await services.batches.get(batchId) : undefined;
      const blog = log.child({ batchId });
      if (existing?.sealed) {
        blog.info({ file: name }, `inbox: ${JSON.stringify(name)} is batch ${batchId}, already ingested: nothing queued again`);
      } else {
        const { header, rows } = await readPlateCsv(fileChunks(path));
        const { batch, created } = await ingest(services, { id: batchId, source: 'inbox', name, metadata: { file: name }, extraColumns: header.extraColumns }, rows);
        const c = batch.counts;
        blog.info(
          { file: name, created, plateColumn: header.plateColumn, total: c.total, enqueued: c.enqueued, rejected: c.rejected, duplicates: c.duplicates },
          `inbox: ingested ${JSON.stringify(name)} as batch ${batchId}${created ? '' : ' (resumed)'}: ${c.total} rows, ${c.enqueued} plates queued`,
        );
      }
      await services.redis.hset(pendingKey, batchId, JSON.stringify({ file: name }));
      const archived = await moveInto(layout, path, 'archive', name, { prefix: `${stamp(now())}-` });
      await services.redis.hdel(processingKey, procName);
      errors.delete(`processing:${procName}`);
      blog.info({ file: name, archive: archived }, `inbox: archived ${JSON.stringify(name)} as archive/${archived}`);
    } catch (err) {
      if (isInputError(err)) {
        // The file changed between the check and the ingest: rows before the error are queued.
        const message = `${err.message} (found while queuing it, after a first full read had passed; rows before this point were queued)`;
        await fail(layout, path, name, err.code, message).catch((e: unknown) => reportError(`processing:${procName}`, e, { file: procName }));
        return;
      }
      // Redis or the disk failing: the file stays in processing/ and is tried again next scan.
      reportError(`processing:${procName}`, err, { file: procName });
    }
  }

  /** Reads the whole file once as a plate CSV while hashing it; an unreadable file throws InputError. */
  function checkFile(path: string): Promise<string> {
    return checkCsv(fileChunks(path));
  }

  async function exists(path: string): Promise<boolean> {
    return lstat(path).then(
      () => true,
      () => false,
    );
  }

  function isInputError(err: unknown): err is VqbError {
    return isVqbError(err) && err.name === 'InputError';
  }

  async function fail(layout: InboxLayout, path: string, file: string, code: string, message: string): Promise<void> {
    const failedName = await moveInto(layout, path, 'failed', file);
    const report = await writeErrorReport(layout, failedName, errorReport(file, code, message, now()));
    counts.failed++;
    log.info({ file, code, failed: failedName, report }, `inbox: failed ${JSON.stringify(file)}: ${message} [${code}]`);
  }

  async function exportFinished(layout: InboxLayout): Promise<void> {
    const pending = await services.redis.hkeys(pendingKey);
    pendingExports = pending.length;
    for (const batchId of pending) {
      if (stopping) return;
      try {
        if (!(await services.batches.exists(batchId))) {
          await services.redis.hdel(pendingKey, batchId);
          log.warn({ batchId }, `inbox: batch ${batchId} no longer exists; nothing to export`);
          continue;
        }
        const info = await services.batches.get(batchId);
        if (info.finishedAt === undefined) continue;
        const result = await exportBatch(services, fileSinkFor(config, layout.dirs.outbox), batchId);
        await services.redis.hdel(pendingKey, batchId);
        pendingExports--;
        counts.exported++;
        errors.delete(`export:${batchId}`);
        const files = Object.values(result.files).map((f) => f.slice(layout.dirs.outbox.length + 1));
        log.info({ batchId, files, rows: result.rows }, `inbox: exported batch ${batchId} to outbox/`);
      } catch (err) {
        reportError(`export:${batchId}`, err, { batchId });
      }
    }
  }

  function scanOnce(): Promise<void> {
    const run = tail.then(scan);
    tail = run.catch(() => {});
    return run;
  }

  return {
    start() {
      if (running) return;
      running = true;
      const loop = async (): Promise<void> => {
        if (!running) return;
        try {
          await scanOnce();
          errors.delete('scan');
        } catch (err) {
          reportError('scan', err, { root: config.root });
        }
        if (running) timer = setTimeout(() => void loop(), config.inbox.pollMs);
      };
      void loop();
    },
    async stop() {
      running = false;
      stopping = true;
      clearTimeout(timer);
      try {
        await tail;
      } finally {
        stopping = false;
      }
    },
    scanOnce,
    status() {
      return {
        running,
        scanning,
        ...(lastScanAt === undefined ? {} : { lastScanAt }),
        waiting: observer.waiting,
        pendingExports,
        ...counts,
        ...(lastError === undefined ? {} : { lastError }),
      };
    },
  };
}
