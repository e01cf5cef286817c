// Commands that let go of batches in Redis: `vqb prune` (finished batches past an age) and
// `vqb delete` (one batch). Both archive first and delete only after the archive read back right
// (retention.ts); a running batch is refused unless --cancel.

import { clock } from '../clock.js';
import { UsageError } from '../errors.js';
import { Retention } from '../retention.js';
import { type QueueServices, withQueueServices } from '../services.js';
import { parseDuration } from '../setting-values.js';
import { archiveFor } from '../sinks/export.js';
import { spanText, whenText } from '../time-text.js';
import { batchIdArg, batchKeyOf } from './batch.js';
import type { Command } from './command.js';

function retentionOf(services: QueueServices): Retention {
  const { config } = services;
  return new Retention(services, archiveFor(config), { retainMs: config.retention.retainMs });
}

export const pruneCommand: Command = {
  usage: `vqb prune [--older-than 30d] [--dry-run] [--json]
  Each finished batch finished at least that long ago (and each whose delete --cancel is done) is
  written to VQ_ARCHIVE_DIR/<batch>/ (exports + manifest.json), read back and checked, then its
  Redis keys are deleted. Running batches are never pruned. --dry-run lists and changes nothing.`,
  options: { 'older-than': { type: 'string' }, 'dry-run': { type: 'boolean' }, json: { type: 'boolean' } },
  async run(ctx) {
    const config = ctx.config();
    let olderThanMs: number | undefined = config.retention.retainMs > 0 ? config.retention.retainMs : undefined;
    if (ctx.flags['older-than'] !== undefined) {
      olderThanMs = parseDuration(String(ctx.flags['older-than']));
      if (olderThanMs === undefined) throw new UsageError('--older-than takes a duration such as 30d, 12h or 0s');
    }
    if (olderThanMs === undefined && !ctx.flags.json) {
      ctx.print('VQ_RETAIN is off: only batches whose delete was asked are pruned (give --older-than D for others)');
    }
    const dryRun = ctx.flags['dry-run'] === true;
    return withQueueServices(config, async (services) => {
      const result = await retentionOf(services).prune({ olderThanMs, dryRun });
      if (ctx.flags.json) {
        ctx.print(JSON.stringify(result));
        return result.failed.length > 0 ? 1 : 0;
      }
      const verb = dryRun ? 'would archive and delete' : 'archiving';
      ctx.print(
        `${result.candidates.length} batches ` +
          (dryRun ? 'to prune' : 'pruned') +
          (olderThanMs !== undefined ? ` (finished more than ${spanText(olderThanMs)} ago)` : ''),
      );
      for (const c of result.candidates) {
        ctx.print(
          `  ${verb} ${c.batchId}: ${c.rows} rows, ${c.plates} plates, about ${mb(c.bytes)} of ` +
            `Redis, finished ${whenText(c.finishedAt, clock.now(), config.timeZone)}` +
            `${c.reason === 'delete' ? ' (delete asked)' : ''}`,
        );
      }
      if (result.candidates.length > 1)
        ctx.print(`  about ${mb(result.candidates.reduce((sum, c) => sum + c.bytes, 0))} of Redis in all`);
      for (const a of result.archived) ctx.print(`  archived ${a.batchId} → ${a.folder}`);
      for (const f of result.failed) ctx.print(`  NOT pruned ${f.batchId} (${f.code}): ${f.message}`);
      return result.failed.length > 0 ? 1 : 0;
    });
  },
};

function mb(bytes: number): string {
  return bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${Math.ceil(bytes / 1e3)} kB`;
}

export const deleteCommand: Command = {
  usage: `vqb delete <batch> [--account A] [--cancel] [--json]
  Writes the batch's exports and manifest to VQ_ARCHIVE_DIR/<batch>/, reads them back, then
  deletes its Redis keys; its results stay available (vqb export, GET …/results) from the archive.
  --cancel: plates not yet sent upstream, held at a spending cap or not, are dropped (outcome
  CANCELLED, no charge); plates already created run to the end, and the batch is archived and
  deleted when they have (by the workers' sweep, or by running this again); with none created, at
  once.`,
  options: { cancel: { type: 'boolean' }, json: { type: 'boolean' }, account: { type: 'string' } },
  async run(ctx) {
    const [id, ...extra] = ctx.args;
    if (!id || extra.length > 0) throw new UsageError('vqb delete takes one batch id (see `vqb status`)');
    const batchId = batchIdArg(id);
    return withQueueServices(ctx.config(), async (services) => {
      const key = batchKeyOf(ctx, batchId);
      const result = await retentionOf(services).delete(key, { cancel: ctx.flags.cancel === true });
      if (ctx.flags.json) ctx.print(JSON.stringify(result));
      else if (result.state === 'cancelling') {
        ctx.print(
          `batch ${batchId} cancelled: ${result.dropped} unsent plates dropped; ${result.running} ` +
            `created plates still running. It is archived and deleted once they finish.`,
        );
      } else
        ctx.print(
          `batch ${batchId} ` +
            `${result.alreadyArchived ? 'was already archived' : 'archived and deleted from Redis'}: ${result.folder}`,
        );
      return 0;
    });
  },
};
