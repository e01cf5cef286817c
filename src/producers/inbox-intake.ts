// The drop folder's intake: stable files are moved from inbox/ to processing/, read in full
// (hashed and checked as CSV or .xlsx), ingested as a batch and archived, or moved to failed/ with a report.
// Redis remembers each file in processing/ (the `inbox:processing` hash: its original name, inode,
// digest and batch id), so a file left there by a crash resumes under the same name and batch.
// Each batch is handed to delivery, which writes its exports to outbox/ when it finishes.
import { lstat, readdir } from 'node:fs/promises';
import { InputError, isError, type VqbError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { QueueServices } from '../services.js';
import { batchIdFor, enqueue } from './enqueue.js';
import type { InboxDelivery } from './inbox-delivery.js';
import type { InboxErrors } from './inbox-errors.js';
import {
  errorReport,
  fileChunks,
  hasInboxExtension,
  INBOX_EXTENSIONS,
  type InboxFolders,
  isForceName,
  moveInto,
  pathIn,
  stamp,
  writeErrorReport,
} from './inbox-files.js';
import { readSidecar, removeSidecar, type SidecarOptions } from './inbox-sidecar.js';
import { InboxObserver } from './inbox-stable.js';
import { checkPlateFile, type PlateFileFormat, plateFileFormat, readPlateFile } from './plate-file.js';

export interface InboxIntakeDeps {
  services: QueueServices;
  log: Logger;
  now: () => number;
  /** How long a file's size and modification time must hold still before it is taken. */
  stableMs: number;
  errors: InboxErrors;
  /** Told the batch each file became, so its exports are written when it finishes. */
  delivery: Pick<InboxDelivery, 'expect'>;
  /** True while the watcher stops: a pass ends before its next file. */
  stopping: () => boolean;
}

/** What Redis remembers about a file in processing/, so a restart keeps its name and batch id. */
interface ProcessingRecord {
  name: string;
  ino: string;
  digest?: string;
  batchId?: string;
  /** What the file's sidecar said (`<name>.json`, inbox-sidecar.ts), read at its take. */
  options?: SidecarOptions;
}

export class InboxIntake {
  readonly #deps: InboxIntakeDeps;
  readonly #processingKey: string;
  readonly #observer: InboxObserver;
  #taken = 0;
  #failed = 0;

  constructor(deps: InboxIntakeDeps) {
    this.#deps = deps;
    this.#processingKey = deps.services.keys.inbox('processing');
    this.#observer = new InboxObserver({ stableMs: deps.stableMs, log: deps.log });
  }

  /** Files in inbox/ seen and waiting to be stable. */
  get waiting(): number {
    return this.#observer.waiting;
  }

  get taken(): number {
    return this.#taken;
  }

  get failed(): number {
    return this.#failed;
  }

  /** Finishes the files left in processing/ (by a crash, or a failure on an earlier scan). */
  async resumeProcessing(layout: InboxFolders): Promise<void> {
    const { services, log, errors } = this.#deps;
    const names = (await readdir(layout.dirs.processing)).filter((n) => !n.startsWith('.'));
    // Records whose file is gone belong to files that were archived or failed just before a crash.
    const stale = (await services.redis.hkeys(this.#processingKey)).filter((k) => !names.includes(k));
    if (stale.length > 0) await services.redis.hdel(this.#processingKey, ...stale);
    for (const name of names) {
      if (this.#deps.stopping()) return;
      if (!errors.has(`processing:${name}`))
        log.info({ file: name }, `inbox: resuming ${JSON.stringify(name)}, left in processing/`);
      await this.#processFile(layout, name);
    }
  }

  /** Takes the files in inbox/ that have become stable, one at a time. */
  async takeFromInbox(layout: InboxFolders): Promise<void> {
    for (const file of await this.#observer.ready(layout, this.#deps.now())) {
      if (this.#deps.stopping()) return;
      this.#observer.forget(file.name);
      await this.#take(layout, file.name, file.path, file.ino);
    }
  }

  async #take(layout: InboxFolders, name: string, path: string, ino: bigint): Promise<void> {
    const { services, log, errors } = this.#deps;
    try {
      if (!hasInboxExtension(name)) {
        await this.#fail(
          layout,
          path,
          name,
          'INBOX_UNSUPPORTED_TYPE',
          `the extension of "${name}" is not one of ${INBOX_EXTENSIONS.join(', ')}`,
        );
        return;
      }
      // Its sidecar's options, if it has one: one that cannot be used fails the file, as bad input does.
      let options: SidecarOptions | undefined;
      try {
        options = await readSidecar(layout, name);
      } catch (err) {
        if (!isInputError(err)) throw err;
        await this.#fail(layout, path, name, err.code, err.message);
        return;
      }
      // The record is written before the move, so a crash right after it still knows the name
      // (processing/ may hold it as `name~2.csv`) and the sidecar's options.
      const processingKey = this.#processingKey;
      const moved = await moveInto(layout, path, 'processing', name, {
        async beforeRename(target: string) {
          const record: ProcessingRecord = { name, ino: String(ino), ...(options ? { options } : {}) };
          await services.redis.hset(processingKey, target, JSON.stringify(record));
        },
      });
      if (options) await removeSidecar(layout, name);
      this.#taken++;
      errors.clear(`inbox:${name}`);
      log.info({ file: name, processing: moved }, `inbox: taken ${JSON.stringify(name)}`);
      await this.#processFile(layout, moved);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !(await exists(path))) return; // removed meanwhile
      errors.report(`inbox:${name}`, err, { file: name });
    }
  }

  /** Hash and check, ingest (or find the batch), remember it for export, archive. */
  async #processFile(layout: InboxFolders, procName: string): Promise<void> {
    const { services, log, errors, delivery, now } = this.#deps;
    const path = pathIn(layout, 'processing', procName);
    let name = procName;
    try {
      const raw = await services.redis.hget(this.#processingKey, procName);
      const record = raw === null ? undefined : (JSON.parse(raw) as ProcessingRecord);
      const st = await lstat(path, { bigint: true });
      // A record about another file (same processing name, other inode) is stale: ignored.
      const known = record !== undefined && record.ino === String(st.ino) ? record : undefined;
      name = known?.name ?? procName;

      let digest: string;
      let format: PlateFileFormat;
      try {
        format = await plateFileFormat(path, { name, chunks: fileChunks });
        digest = await checkPlateFile(path, format, { chunks: fileChunks });
      } catch (err) {
        if (!isInputError(err)) throw err;
        await this.#fail(layout, path, name, err.code, err.message);
        await services.redis.hdel(this.#processingKey, procName);
        return;
      }
      const batchId =
        known?.digest === digest && known.batchId !== undefined
          ? known.batchId
          : batchIdFor(name, digest, isForceName(name));
      const options = known?.options;
      const next: ProcessingRecord = { name, ino: String(st.ino), digest, batchId, ...(options ? { options } : {}) };
      await services.redis.hset(this.#processingKey, procName, JSON.stringify(next));

      const existing = (await services.batches.exists(batchId)) ? await services.batchViews.get(batchId) : undefined;
      const blog = log.child({ batchId });
      if (existing?.sealed) {
        blog.info(
          { file: name },
          `inbox: ${JSON.stringify(name)} is batch ${batchId}, already ingested: nothing queued again`,
        );
      } else {
        const { header, rows } = await readPlateFile(path, format, { chunks: fileChunks });
        const { batch, created } = await enqueue(
          services,
          { source: 'inbox', name, digest, rows, extraColumns: header.extraColumns },
          {
            batchId,
            metadata: { file: name },
            ...(options?.deadline !== undefined ? { deadline: options.deadline } : {}),
            // VQ_INBOX_NOTIFY_URL: the drop folder's batches tell one receiver when they finish.
            ...(services.config.webhooks.inboxNotifyUrl !== undefined
              ? { callbackUrl: services.config.webhooks.inboxNotifyUrl }
              : {}),
          },
        );
        const c = batch.counts;
        blog.info(
          {
            file: name,
            created,
            plateColumn: header.plateColumn,
            total: c.total,
            enqueued: c.enqueued,
            rejected: c.rejected,
            duplicates: c.duplicates,
          },
          `inbox: ingested ${JSON.stringify(name)} as batch ` +
            `${batchId}${created ? '' : ' (resumed)'}: ${c.total} rows, ${c.enqueued} plates queued`,
        );
      }
      await delivery.expect(batchId, name);
      const archived = await moveInto(layout, path, 'archive', name, { prefix: `${stamp(now())}-` });
      await services.redis.hdel(this.#processingKey, procName);
      errors.clear(`processing:${procName}`);
      blog.info({ file: name, archive: archived }, `inbox: archived ${JSON.stringify(name)} as archive/${archived}`);
    } catch (err) {
      if (isInputError(err)) {
        // The file changed between the check and the ingest: rows before the error are queued.
        const message =
          `${err.message} (found while queuing it, after a first full read had ` +
          `passed; rows before this point were queued)`;
        await this.#fail(layout, path, name, err.code, message).catch((e: unknown) =>
          errors.report(`processing:${procName}`, e, { file: procName }),
        );
        return;
      }
      // Redis or the disk failing: the file stays in processing/ and is tried again next scan.
      errors.report(`processing:${procName}`, err, { file: procName });
    }
  }

  async #fail(layout: InboxFolders, path: string, file: string, code: string, message: string): Promise<void> {
    const failedName = await moveInto(layout, path, 'failed', file);
    const report = await writeErrorReport(layout, failedName, errorReport(file, code, message, this.#deps.now()));
    this.#failed++;
    this.#deps.log.info(
      { file, code, failed: failedName, report },
      `inbox: failed ${JSON.stringify(file)}: ${message} [${code}]`,
    );
  }
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

function isInputError(err: unknown): err is VqbError {
  return isError(err, InputError);
}
