// The drop folder: operators drop CSV or Excel (.xlsx) files into <VQ_ROOT>/inbox/, each becomes a batch, and its
// exports come back in <VQ_ROOT>/outbox/ once every plate has an outcome. Polling (readdir +
// lstat every VQ_INBOX_POLL), no file-system events, so it works the same on Docker volumes and
// network shares.
//
//   inbox/       drop files here: .csv, .txt, .tsv or .xlsx (any case; a workbook's first visible
//                sheet is read); other extensions go to failed/
//   processing/  a taken file while it is hashed and ingested (left here by a crash: resumed)
//   archive/     ingested files, as YYYYMMDD-HHMMSS-<name> (UTC time of archiving)
//   failed/      files that could not be read, each with <name>.error.txt saying why and what to do
//   outbox/      <batch>.csv, <batch>.jsonl, <batch>.rejects.csv (and <batch>.xlsx for a dropped
//                workbook), written when the batch finishes
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
// Every file is read in full (hashed and checked as CSV or .xlsx) before anything is queued, so a file
// that turns out to be unreadable halfway costs nothing. Run one watcher per VQ_ROOT.
//
// This module runs the loop; inbox-intake.ts takes files and ingests them, inbox-delivery.ts
// writes the exports of finished batches, inbox-stable.ts decides when a file is complete and
// inbox-files.ts does the file handling.
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { QueueServices } from '../services.js';
import { InboxDelivery } from './inbox-delivery.js';
import { InboxErrors } from './inbox-errors.js';
import { ensureInboxFolders } from './inbox-files.js';
import { InboxIntake } from './inbox-intake.js';

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

/**
 * Intake (inbox/ → processing/ → a batch → archive/) and delivery (finished batches → outbox/), on
 * one polling loop.
 */
export function createInboxWatcher(deps: InboxWatcherDeps): InboxWatcher {
  const { services, config } = deps;
  const now = deps.now ?? clock.now;
  const log = deps.logger.child({ component: 'inbox' });
  let tail: Promise<void> = Promise.resolve();
  let running = false;
  let isStopping = false;
  let scanning = false;
  let timer: NodeJS.Timeout | undefined;
  let lastScanAt: number | undefined;

  const errors = new InboxErrors(log);
  const stopping = () => isStopping;
  const delivery = new InboxDelivery({ services, config, log, errors, stopping });
  const intake = new InboxIntake({ services, log, now, stableMs: config.inbox.stableMs, errors, delivery, stopping });

  async function scan(): Promise<void> {
    scanning = true;
    try {
      const layout = await ensureInboxFolders(config.root);
      await intake.resumeProcessing(layout);
      await intake.takeFromInbox(layout);
      await delivery.exportFinished(layout);
      lastScanAt = now();
    } finally {
      scanning = false;
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
          errors.clear('scan');
        } catch (err) {
          errors.report('scan', err, { root: config.root });
        }
        if (running) timer = clock.setTimeout(() => void loop(), config.inbox.pollMs);
      };
      void loop();
    },
    async stop() {
      running = false;
      isStopping = true;
      clock.clearTimeout(timer);
      try {
        await tail;
      } finally {
        isStopping = false;
      }
    },
    scanOnce,
    status() {
      const lastError = errors.last;
      return {
        running,
        scanning,
        ...(lastScanAt === undefined ? {} : { lastScanAt }),
        waiting: intake.waiting,
        pendingExports: delivery.pendingExports,
        taken: intake.taken,
        failed: intake.failed,
        exported: delivery.exported,
        ...(lastError === undefined ? {} : { lastError }),
      };
    },
  };
}
