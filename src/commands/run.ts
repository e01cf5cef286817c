import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Command, CommandContext } from '../cli.js';
import { requireUpstream, type Config } from '../config.js';
import { InputError, UsageError } from '../errors.js';
import { readPlateCsv } from '../producers/csv.js';
import { batchIdFor, ingest } from '../producers/ingest.js';
import { openQueueServices, type QueueServices } from '../queue/services.js';
import { exportBatch, fileSinkFor } from '../sinks/export.js';
import { startWorker } from '../../workers/worker.js';
import { describeBatch } from './format.js';
import { createProgress } from './progress.js';

export const EXIT_STOPPED = 130;
export const EXIT_BLOCKED = 3;

/** sha256 of the file, streamed: the same bytes give the same batch id, whatever the file's name. */
async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export interface RunOutcome {
  code: number;
  batchId: string;
  files?: { csv?: string; jsonl?: string; rejects?: string };
}

/** Ingests the file (or resumes its batch), works it with in-process workers, and exports it. */
export async function runFile(ctx: CommandContext, config: Config, file: string, options: { column?: string; force?: boolean; batchId?: string; services?: QueueServices }): Promise<RunOutcome> {
  requireUpstream(config);
  try {
    await access(file);
  } catch {
    throw new InputError('INPUT_NOT_FOUND', `cannot read ${file}`);
  }
  const logger = ctx.logger(config);
  const services = options.services ?? (await openQueueServices(config));
  try {
    const name = basename(file);
    const batchId = options.batchId ?? batchIdFor(name, await fileDigest(file), options.force === true);
    const line = await services.line.state();
    if (line.pause) {
      // Running the command again is how a user says "I fixed it": try once more.
      ctx.print(`the line was paused (${line.pause.message}); resuming`);
      await services.line.resume();
    }
    const existing = (await services.batches.exists(batchId)) ? await services.batches.get(batchId) : undefined;
    if (existing?.sealed) {
      ctx.print(`resuming batch ${batchId}: ${existing.counts.done + existing.counts.failed}/${existing.counts.enqueued} already finished`);
    } else {
      const column = options.column === undefined ? undefined : /^\d+$/.test(options.column) ? Number(options.column) : options.column;
      const { header, rows } = await readPlateCsv(createReadStream(file), column === undefined ? {} : { column });
      const { batch } = await ingest(services, { id: batchId, source: 'file', name, extraColumns: header.extraColumns }, rows);
      ctx.print(`batch ${batchId}: ${batch.counts.total} rows, ${batch.counts.enqueued} plates enqueued, ${batch.counts.rejected} rejected, ${batch.counts.duplicates} duplicates (plate column "${header.plateColumn}")`);
    }

    const worker = startWorker(config, { logger });
    const progress = createProgress(ctx.io.stdout, logger);
    let stopped = false;
    void ctx.io.stopSignal.then(() => {
      stopped = true;
    });
    let code = 0;
    try {
      for (;;) {
        const [info, state] = await Promise.all([services.batches.get(batchId), services.line.state()]);
        progress.update(info, state);
        if (info.finishedAt !== undefined) break;
        if (state.pause) {
          progress.finish();
          ctx.io.stderr.write(`vqb: cannot go on: ${state.pause.message}\n`);
          code = EXIT_BLOCKED;
          break;
        }
        if (stopped) {
          progress.finish();
          ctx.print('stopping: letting running requests finish…');
          code = EXIT_STOPPED;
          break;
        }
        await Promise.race([new Promise((r) => setTimeout(r, 500)), ctx.io.stopSignal]);
      }
    } finally {
      progress.finish();
      await worker.close();
    }
    if (code !== 0) {
      ctx.print(`nothing is lost: run the same command again to resume batch ${batchId}`);
      return { code, batchId };
    }
    const result = await exportBatch(services, fileSinkFor(config), batchId);
    ctx.print(describeBatch(await services.batches.get(batchId)));
    ctx.print(`exports:\n  ${result.files.csv}\n  ${result.files.jsonl}\n  ${result.files.rejects}`);
    return { code: 0, batchId, files: result.files };
  } finally {
    if (!options.services) await services.close();
  }
}

export const runCommand: Command = {
  summary: 'the main job: enqueue a CSV of plates, work it here with progress, write the exports',
  usage: `vqb run <file.csv> [--out DIR] [--column NAME|N] [--force] [--batch-id ID]
  Reads the CSV (delimiter, encoding and plate column detected), creates the batch (its id comes
  from the file's content, so running the same file again resumes it instead of paying again;
  --force starts a new batch), runs workers in this process and writes <out>/<batch>.csv,
  <batch>.jsonl and <batch>.rejects.csv when every plate has an outcome.
  Exit codes: 0 finished; 3 the line cannot go on (key invalid/expired, missing permission);
  130 stopped by Ctrl-C (run it again to resume); 2 bad usage or settings.`,
  options: { column: { type: 'string' }, force: { type: 'boolean' }, 'batch-id': { type: 'string' } },
  async run(ctx) {
    const [file, ...extra] = ctx.args;
    if (!file || extra.length > 0) throw new UsageError('vqb run takes one CSV file (see `vqb run --help`)');
    const outcome = await runFile(ctx, ctx.config(), file, {
      ...(typeof ctx.flags.column === 'string' ? { column: ctx.flags.column } : {}),
      force: ctx.flags.force === true,
      ...(typeof ctx.flags['batch-id'] === 'string' ? { batchId: ctx.flags['batch-id'] } : {}),
    });
    return outcome.code;
  },
};

