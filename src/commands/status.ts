import { clock } from '../clock.js';
import { UsageError } from '../errors.js';
import { costOf, formatMoney } from '../money.js';
import { planText } from '../plans/deadline.js';
import { batchContext, batchContexts } from '../presenters/batch-context.js';
import { archivedBatchView, batchView } from '../presenters/batch-view.js';
import { describeRate, describeRecovery, waitingOf } from '../presenters/line.js';
import { strandedText } from '../presenters/stranded.js';
import { describeBatch, describeLine } from '../presenters/text.js';
import type { BatchInfo, BatchKey } from '../queue/batch/store.js';
import type { AccountLineState } from '../queue/line.js';
import type { PoolState } from '../queue/pool.js';
import { WorkerPresence } from '../queue/presence.js';
import { lentOf } from '../queue/scheduler.js';
import { type QueueServices, withQueueServices } from '../services.js';
import { archiveFor } from '../sinks/export.js';
import { whenText } from '../time-text.js';
import { failureText } from '../webhooks/deliveries.js';
import { batchIdArg, batchKeyOf } from './batch.js';
import type { Command, CommandContext } from './command.js';

/**
 * A batch's part of its account's creates; said only of a batch that still has creates to make,
 * and as "now" only while the account makes any (not paused or held, a worker alive).
 */
function shareText(finished: boolean, share: number, moving: boolean): string {
  if (finished) return '';
  if (share <= 0) return '; no creates waiting in this batch (its plates are being polled or are held)';
  const part = `${Math.round(share * 100)} % of the account's creates`;
  return moving ? `; this batch gets ${part} now` : `; once the account moves again, this batch gets ${part}`;
}

/** Whether an account makes creates now: nothing holds its line and a worker process is alive. */
function moving(line: AccountLineState, workers: number): boolean {
  return workers > 0 && waitingOf(line) === undefined;
}

/**
 * Whether nothing moves a batch now: no worker is alive, or its account is held (or no longer
 * configured). A pooled batch goes on while any key of its pool serves, so its home key's line
 * alone does not stop it.
 */
function batchStopped(info: BatchInfo, line: AccountLineState | undefined, workers: number): boolean {
  if (workers === 0) return true;
  if (info.pool !== undefined) return false;
  return line === undefined || waitingOf(line) !== undefined;
}

/**
 * What an account's line is doing when nothing holds it: `running` only when a worker process is
 * alive to run its work; with work and no worker, that nobody runs it and what to start; without
 * work, `idle`.
 */
export function activityText(hasWork: boolean, workers: number): string {
  if (!hasWork) return 'idle (nothing queued)';
  if (workers > 0) return 'running';
  return (
    'no worker is running: its plates wait; start `vqb work` (or `vqb serve --workers`, ' +
    'or `vqb run` on a file, whose workers serve every account)'
  );
}

/** A batch whose account is no longer in the settings: its history, and why nothing of it runs. */
function unconfiguredText(account: string): string {
  return (
    `account ${account} is not configured now (not in VQ_ACCOUNTS_FILE or the settings): this batch ` +
    'is history; its plates run again only with the account configured'
  );
}

/** --limit: how many of the newest batches to list, 0 to 1000 (5 when absent). */
export function limitFlag(value: unknown): number {
  if (value === undefined) return 5;
  const n = Number(value);
  if (!/^\d+$/.test(String(value)) || n > 1_000)
    throw new UsageError(
      `--limit takes a whole number of batches from 0 to 1000; got ${JSON.stringify(String(value))}`,
    );
  return n;
}

/** `vqb status`'s lines for the pools of keys: the pool's rate, then each key's rate, share and state. */
export function describePools(pools: readonly PoolState[]): string[] {
  const lines: string[] = [];
  for (const p of pools) {
    lines.push(`pool ${p.pool}: ${p.perSecond.toFixed(1)}/s, the sum of its serving keys'`);
    for (const k of p.keys)
      lines.push(
        `  key ${k.account}: ${k.perSecond.toFixed(1)}/s, ${Math.round(k.share * 100)} % of the ` +
          `pool, ${k.state === 'serving' ? 'serving' : `holds (${k.state}): its share went to the others`}`,
      );
    for (const group of p.sharedQuota)
      lines.push(`  keys ${group.join(', ')} look like one quota (their 429s and remainders move together)`);
  }
  return lines;
}

/** `vqb status <batch>`: the batch, its plan, its account's line, its webhooks; an archived one from its manifest. */
async function showBatch(ctx: CommandContext, services: QueueServices, key: BatchKey, workers: number) {
  const id = typeof key === 'string' ? key : key.id;
  // Every instant a person reads is on the clock of VQ_TIME_ZONE (else TZ), named; --json keeps ISO 8601.
  const zone = services.config.timeZone;
  const now = clock.now();
  if (!(await services.batches.exists(key))) {
    // Pruned from Redis: the archive's manifest answers (or BATCH_NOT_FOUND, as before).
    const manifest = await archiveFor(services.config).manifest(id);
    if (manifest !== undefined) {
      const view = archivedBatchView(manifest, now);
      if (ctx.flags.json) ctx.print(JSON.stringify(view, null, 2));
      else
        ctx.print(
          `${describeBatch(manifest.batch, now, undefined, { zone })}\n` +
            `  archived ${whenText(manifest.archivedAt, now, zone)} in ` +
            `${archiveFor(services.config).folder(id)} (no longer in Redis)`,
        );
      return 0;
    }
  }
  const info = await services.batchViews.get(key);
  const context = await batchContext(services, info);
  // The batch as the HTTP API and the library show it (one shape: presenters/batch-view.ts).
  if (ctx.flags.json) ctx.print(JSON.stringify(batchView(info, context, now), null, 2));
  else {
    const stopped = context.unconfigured === true || batchStopped(info, context.line, workers);
    ctx.print(describeBatch(info, now, context.price, { zone, stopped }));
    for (const line of strandedText(context.stranded ?? [])) ctx.print(`  ${line}`);
    if (context.plan) ctx.print(`  ${planText(context.plan.verdict, context.plan.atRisk, now, zone)}`);
    ctx.print(
      context.unconfigured
        ? `  ${unconfiguredText(info.account)}`
        : `  account ${info.account}: ` +
            `${describeLine(context.line, now, zone) ?? activityText(info.finishedAt === undefined, workers)}` +
            shareText(info.finishedAt !== undefined, context.share, !stopped),
    );
    for (const d of context.webhooks ?? []) {
      ctx.print(
        `  webhook ${d.event} (${d.id}) to ${d.url}: ${d.state}, ${d.attempts} ` +
          `attempt(s)${d.lastError ? `; last error: ${failureText(d.lastError)}` : ''}`,
      );
    }
  }
  return 0;
}

export const statusCommand: Command = {
  usage: `vqb status [batch [--account A]] [--json] [--limit N]
  --account A  with a batch id: that account's batch of the id (a file run under two accounts)
  --limit N  list the N newest batches (default 5; 0 lists none, only how many there are)`,
  options: { json: { type: 'boolean' }, limit: { type: 'string' }, account: { type: 'string' } },
  async run(ctx) {
    return withQueueServices(ctx.config(), async (services) => {
      const [batchId] = ctx.args;
      const workers = await new WorkerPresence(services.redis, services.keys).alive();
      if (batchId) return showBatch(ctx, services, batchKeyOf(ctx, batchIdArg(batchId)), workers);
      const limit = limitFlag(ctx.flags.limit);
      const accounts = await Promise.all(
        services.accounts.all().map(async ({ id, line, queue }) => {
          const [state, jobs, inflight, shares] = await Promise.all([
            line.state(),
            queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'failed'),
            services.inflight.count(id),
            services.scheduler.shares(id),
          ]);
          // With a price: what left today and this month (UTC) and may be billed, as `vqb cost`
          // and `vqb budget` read it (one reckoning: a `vqb check --create` is in it).
          const price = services.accounts.for(id).account.price;
          const sent = price ? await services.costs.sentBy(id) : undefined;
          const spend =
            price && sent
              ? {
                  today: costOf(price, sent.today.createsSent, sent.today.pollsSent),
                  thisMonth: costOf(price, sent.thisMonth.createsSent, sent.thisMonth.pollsSent),
                }
              : undefined;
          return { account: id, line: state, jobs, inflight, shares, ...(spend ? { spend } : {}) };
        }),
      );
      // Pools of keys: the pool's rate is its serving keys' summed; each key's share and state.
      const pools = await services.pools.states();
      // A range of 0 to -1 is every batch in Redis: --limit 0 asks for the count alone.
      const recent =
        limit === 0
          ? { total: (await services.batchViews.list(0, 1)).total, batches: [] }
          : await services.batchViews.list(0, limit);
      const now = clock.now();
      if (ctx.flags.json) {
        const batches = (await batchContexts(services, recent.batches)).map((context, i) =>
          batchView(recent.batches[i]!, context, now),
        );
        ctx.print(JSON.stringify({ accounts, pools, batches: { total: recent.total, batches } }, null, 2));
        return 0;
      }
      // Every instant a person reads is on the clock of VQ_TIME_ZONE (else TZ), named.
      const zone = services.config.timeZone;
      for (const a of accounts) {
        const j = a.jobs;
        const queued = (j.prioritized ?? 0) + (j.waiting ?? 0) + (j.delayed ?? 0) + (j.active ?? 0);
        const hasWork = queued > 0 || a.inflight > 0 || a.shares.length > 0;
        ctx.print(
          `account ${a.account} ` +
            `(${a.line.rate ? describeRate(a.line.rate, now) : a.line.rateLimit}): ` +
            `${describeLine(a.line, now, zone) ?? activityText(hasWork, workers)}`,
        );
        const recovery = describeRecovery(a.line, now, zone);
        if (recovery) ctx.print(`  ${recovery}`);
        ctx.print(
          `  jobs: ${(j.prioritized ?? 0) + (j.waiting ?? 0)} waiting, ${j.delayed} between polls, ` +
            `${j.active} active, ${j.failed} failed; ${a.inflight} queries in flight`,
        );
        const price = services.accounts.for(a.account).account.price;
        if (price && a.spend) {
          ctx.print(
            `  spend: today ${formatMoney(a.spend.today)}, this month ` +
              `${formatMoney(a.spend.thisMonth)} (UTC; ${formatMoney(costOf(price, 1))} per query)`,
          );
        }
        const when = moving(a.line, workers) ? 'now' : 'once the account moves again';
        for (const s of a.shares) {
          const lent = lentOf(s.batchId);
          const which = lent ? `${lent.batchId} (pooled, home ${lent.home})` : s.batchId;
          ctx.print(
            `  batch ${which}: ${s.cls}, weight ${s.weight}, ${Math.round(s.share * 100)} % of the creates ${when}`,
          );
        }
      }
      for (const line of describePools(pools)) ctx.print(line);
      ctx.print(
        `batches: ${recent.total}${recent.total > recent.batches.length ? ` (newest ${recent.batches.length})` : ''}`,
      );
      const plans = await batchContexts(services, recent.batches);
      recent.batches.forEach((b, i) => {
        const line = plans[i]?.unconfigured ? undefined : accounts.find((a) => a.account === b.account)?.line;
        const stopped = batchStopped(b, line, workers);
        ctx.print(describeBatch(b, now, plans[i]?.price, { zone, stopped }));
        if (plans[i]?.unconfigured) ctx.print(`  ${unconfiguredText(b.account)}`);
        const plan = plans[i]?.plan;
        if (plan) ctx.print(`  ${planText(plan.verdict, plan.atRisk, now, zone)}`);
      });
      return 0;
    });
  },
};
