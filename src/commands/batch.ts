// Commands on one stored batch: rebuild its exports, retry its failed plates.

import { UsageError } from '../errors.js';
import { BATCH_ID_RULE, type BatchKey, isBatchId } from '../queue/batch/store.js';
import { WorkerPresence } from '../queue/presence.js';
import { rerunFailed } from '../queue/rerun.js';
import { EXPORT_FORMATS, type ExportFormat } from '../schemas/result-row.js';
import { withQueueServices } from '../services.js';
import { archiveFor, exportBatch, fileSinkFor } from '../sinks/export.js';
import type { Command, CommandContext } from './command.js';

function oneBatch(args: string[], command: string): string {
  const [batchId, ...extra] = args;
  if (!batchId || extra.length > 0) throw new UsageError(`vqb ${command} takes one batch id (see \`vqb status\`)`);
  return batchIdArg(batchId);
}

/**
 * The batch a command names: by id alone, or with `--account A` that account's batch of the id (a
 * file run under two accounts has one id in each: BATCH_ID_AMBIGUOUS without it).
 */
export function batchKeyOf(ctx: CommandContext, batchId: string): BatchKey {
  const account = ctx.flags.account;
  if (typeof account !== 'string') return batchId;
  if (!ACCOUNT_ID.test(account)) throw new UsageError(`--account: not an account id: ${JSON.stringify(account)}`);
  return { id: batchId, account };
}

/** What an account id may be (docs/accounts.md): lower-case letters, digits, _ and -, at most 32. */
const ACCOUNT_ID = /^[a-z0-9_-]{1,32}$/;

/**
 * A batch id given on the command line, checked before it reaches a Redis key name (`x:rows` is
 * another key of batch x).
 */
export function batchIdArg(value: string): string {
  if (!isBatchId(value))
    throw new UsageError(
      `not a batch id: ` +
        `${JSON.stringify(value.length > 120 ? `${value.slice(0, 120)}…` : value)} ` +
        `(${BATCH_ID_RULE}; see \`vqb status\`)`,
    );
  return value;
}

export const exportCommand: Command = {
  usage: `vqb export <batch> [--account A] [--format ${[...EXPORT_FORMATS, 'all'].join('|')}] [--out DIR] [--json]
  Rebuilds <out>/<batch>.csv, <batch>.rejects.csv, <batch>.jsonl and <batch>.xlsx (the CSV's
  columns and rows as typed cells, rejects on a second sheet) from Redis at any time (default
  --format all; one format writes only its file); a batch still running exports its finished rows
  and marks the rest "pending". An archived batch (pruned from Redis) is exported from its archive
  in VQ_ARCHIVE_DIR.`,
  options: { format: { type: 'string' }, json: { type: 'boolean' }, account: { type: 'string' } },
  async run(ctx) {
    const batchId = oneBatch(ctx.args, 'export');
    const key = batchKeyOf(ctx, batchId);
    const format = String(ctx.flags.format ?? 'all');
    if (format !== 'all' && !(EXPORT_FORMATS as readonly string[]).includes(format))
      throw new UsageError(`--format is ${EXPORT_FORMATS.join(', ')} or all`);
    const formats: readonly ExportFormat[] = format === 'all' ? EXPORT_FORMATS : [format as ExportFormat];
    const config = ctx.config();
    return withQueueServices(config, async (services) => {
      const result = await exportBatch(services, fileSinkFor(config), key, formats, archiveFor(config));
      if (ctx.flags.json) ctx.print(JSON.stringify(result));
      else for (const path of Object.values(result.files)) ctx.print(path);
      return 0;
    });
  },
};

export const retryCommand: Command = {
  usage: `vqb retry <batch> [--account A] [--recreate] [--json]
  Failed plates that hold a queryId resume polling it (no new charge). Plates with no queryId, or
  all of them with --recreate, are created again (a new charge each). Workers must be running
  (vqb work, or vqb run on the same file).`,
  options: { recreate: { type: 'boolean' }, json: { type: 'boolean' }, account: { type: 'string' } },
  async run(ctx) {
    const batchId = oneBatch(ctx.args, 'retry');
    const key = batchKeyOf(ctx, batchId);
    return withQueueServices(ctx.config(), async (services) => {
      const result = await rerunFailed(services, key, { recreate: ctx.flags.recreate === true });
      const workers = await new WorkerPresence(services.redis, services.keys).alive();
      if (ctx.flags.json) {
        ctx.print(JSON.stringify({ ...result, workersAlive: workers }));
        return 0;
      }
      const plates = result.retried === 1 ? 'failed plate' : 'failed plates';
      ctx.print(
        `batch ${batchId}: ${result.retried} ${plates} queued again (${result.recreated} will be ` +
          `created again, ${result.retried - result.recreated} resume ` +
          `polling)${result.skipped ? `; ${result.skipped} still running, left alone` : ''}`,
      );
      if (result.retried > 0 && workers === 0) {
        const { account } = await services.batchViews.get(key);
        ctx.print(
          `no worker is running for account ${account}: start ` +
            `\`vqb work\` (or \`vqb serve --workers\`) and the batch goes on; until then it stays "running"`,
        );
      }
      return 0;
    });
  },
};
