// The drop folder's delivery: batches made from dropped files are remembered in Redis (the
// `inbox:pending` hash, batch id → file) until they finish, then their exports are written to
// outbox/ and the batch is forgotten. A batch that fails to export stays pending and is tried again
// on the next scan.
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { QueueServices } from '../services.js';
import { exportBatch, fileSinkFor } from '../sinks/export.js';
import type { InboxErrors } from './inbox-errors.js';
import type { InboxFolders } from './inbox-files.js';

export interface InboxDeliveryDeps {
  services: QueueServices;
  config: Config;
  log: Logger;
  errors: InboxErrors;
  /** True while the watcher stops: a pass ends before its next batch. */
  stopping: () => boolean;
}

export class InboxDelivery {
  readonly #deps: InboxDeliveryDeps;
  readonly #pendingKey: string;
  #pending = 0;
  #exported = 0;

  constructor(deps: InboxDeliveryDeps) {
    this.#deps = deps;
    this.#pendingKey = deps.services.keys.inbox('pending');
  }

  /** Batches whose exports are written when they finish (as of the last pass). */
  get pendingExports(): number {
    return this.#pending;
  }

  get exported(): number {
    return this.#exported;
  }

  /** Remembers that `batchId`, made from `file`, is exported to outbox/ (every format) once it finishes. */
  async expect(batchId: string, file: string): Promise<void> {
    await this.#deps.services.redis.hset(this.#pendingKey, batchId, JSON.stringify({ file }));
  }

  /** Writes the exports of every pending batch that has finished. */
  async exportFinished(layout: InboxFolders): Promise<void> {
    const { services, config, log, errors } = this.#deps;
    const pending = await services.redis.hkeys(this.#pendingKey);
    this.#pending = pending.length;
    for (const batchId of pending) {
      if (this.#deps.stopping()) return;
      try {
        if (!(await services.batches.exists(batchId))) {
          await services.redis.hdel(this.#pendingKey, batchId);
          log.warn({ batchId }, `inbox: batch ${batchId} no longer exists; nothing to export`);
          continue;
        }
        const info = await services.batchViews.get(batchId);
        if (info.finishedAt === undefined) continue;
        // Every format (an `also` list in an entry from before every batch got every format is ignored).
        const result = await exportBatch(services, fileSinkFor(config, layout.dirs.outbox), batchId);
        await services.redis.hdel(this.#pendingKey, batchId);
        this.#pending--;
        this.#exported++;
        errors.clear(`export:${batchId}`);
        const files = Object.values(result.files).map((f) => f.slice(layout.dirs.outbox.length + 1));
        log.info({ batchId, files, rows: result.rows }, `inbox: exported batch ${batchId} to outbox/`);
      } catch (err) {
        errors.report(`export:${batchId}`, err, { batchId });
      }
    }
  }
}
