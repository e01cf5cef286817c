// `vqb watch`: lists of plates re-checked on a schedule, reporting only what changed
// (docs/watch.md). Thin: reads the flags and the file, calls src/watch/watches.ts.

import { basename, extname } from 'node:path';
import { PassThrough } from 'node:stream';
import { clock } from '../clock.js';
import { UsageError } from '../errors.js';
import { formatMoney } from '../money.js';
import { WorkerPresence } from '../queue/presence.js';
import { type QueueServices, withQueueServices } from '../services.js';
import { whenText } from '../time-text.js';
import { writeChanges } from '../watch/changes-export.js';
import { readWatchFile } from '../watch/plates.js';
import { windowOnClock, windowText } from '../watch/schedule.js';
import type { ChangesFormat, NotifyRule, OverlapRule } from '../watch/store.js';
import { everyText } from '../watch/view.js';
import { Watches, type WatchRequest, type WatchView } from '../watch/watches.js';
import type { Command, CommandContext } from './command.js';

const USAGE = `vqb watch add FILE (--every DURATION | --cron "<pattern>") [--name NAME] [--account A | --pool P]
      [--window HH:MM-HH:MM] [--overlap wait|skip] [--notify plate|round] [--callback-url URL]
      [--ignore FIELD,FIELD] [--per-month N] [--per-month-spend X] [--format csv|jsonl|xlsx]
  vqb watch list [--account A]
  vqb watch show|pause|resume|remove NAME [--account A]
  vqb watch changes NAME [--round N] [--format jsonl|csv|xlsx]     (to standard output)
  vqb watch budget NAME --per-month N|none
  vqb watch plates NAME [--add FILE] [--remove FILE]
  --json: the answer as JSON (add, list, show, pause, resume, budget, plates)`;

const NO_WORKER =
  'no worker is running: rounds start only while one is (`vqb work`, or `vqb serve --workers`); ' +
  'this watch waits until then';

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function oneOf<T extends string>(flag: string, value: unknown, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw new UsageError(`--${flag} takes ${allowed.join(' or ')}`);
}

function count(flag: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${flag} takes a whole number`);
  return n;
}

function amount(flag: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`--${flag} takes an amount such as 150 or 99.90`);
  return n;
}

export const watchCommand: Command = {
  usage: USAGE,
  options: {
    every: { type: 'string' },
    cron: { type: 'string' },
    window: { type: 'string' },
    name: { type: 'string' },
    account: { type: 'string' },
    pool: { type: 'string' },
    overlap: { type: 'string' },
    notify: { type: 'string' },
    'callback-url': { type: 'string' },
    ignore: { type: 'string' },
    'per-month': { type: 'string' },
    'per-month-spend': { type: 'string' },
    format: { type: 'string' },
    round: { type: 'string' },
    add: { type: 'string' },
    remove: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(ctx) {
    const [sub, arg] = ctx.args;
    if (sub === undefined) throw new UsageError(`which? ${USAGE}`);
    return withQueueServices(ctx.config(), async (services) => {
      const watches = new Watches(services, ctx.logger(services.config));
      try {
        return await runSub(ctx, services, watches, sub, arg);
      } finally {
        await watches.close();
      }
    });
  },
};

async function runSub(
  ctx: CommandContext,
  services: QueueServices,
  watches: Watches,
  sub: string,
  arg: string | undefined,
): Promise<number> {
  const all = services.config.accounts.map((a) => a.id);
  const account = str(ctx.flags.account);
  const show = async (view: WatchView) => {
    ctx.print(ctx.flags.json ? JSON.stringify(view) : describe(view, services));
    // Rounds are started by worker processes: without one, a watch silently never runs.
    if (!ctx.flags.json && !view.paused && (await new WorkerPresence(services.redis, services.keys).alive()) === 0)
      ctx.print(NO_WORKER);
  };
  if (sub === 'list') {
    const views = await watches.list(account !== undefined ? all.filter((a) => a === account) : all);
    if (ctx.flags.json) ctx.print(JSON.stringify({ watches: views }));
    else if (views.length === 0) ctx.print('no watch lists');
    else for (const v of views) ctx.print(oneLine(v, services.config.timeZone));
    return 0;
  }
  if (arg === undefined) throw new UsageError(`vqb watch ${sub} needs ${sub === 'add' ? 'a FILE' : 'a NAME'}`);
  if (sub === 'add') {
    const file = await readWatchFile(arg);
    const request = addRequest(ctx, arg);
    const view = await watches.add(request, file.plates, all);
    if (file.invalidCount > 0 && !ctx.flags.json)
      ctx.print(`${file.invalidCount} rows are not plates and are not watched (${file.invalid.join(', ')})`);
    await show(view);
    return 0;
  }
  const ref = await watches.find(arg, all, account);
  switch (sub) {
    case 'show':
      await show(await watches.show(ref));
      return 0;
    case 'pause':
      await show(await watches.pause(ref));
      return 0;
    case 'resume':
      await show(await watches.resume(ref));
      return 0;
    case 'remove':
      await watches.remove(ref);
      ctx.print(ctx.flags.json ? JSON.stringify({ removed: ref.name }) : `watch ${ref.name} removed`);
      return 0;
    case 'budget': {
      const raw = ctx.flags['per-month'];
      if (raw === undefined) throw new UsageError('vqb watch budget NAME --per-month N|none');
      await show(await watches.setBudget(ref, raw === 'none' ? null : (count('per-month', raw) ?? null)));
      return 0;
    }
    case 'plates': {
      const now = clock.now();
      const add = str(ctx.flags.add);
      const remove = str(ctx.flags.remove);
      if (add !== undefined) await watches.store.addPlates(ref, (await readWatchFile(add)).plates, now);
      if (remove !== undefined) await watches.store.removePlates(ref, (await readWatchFile(remove)).plates, now);
      await show(await watches.show(ref));
      return 0;
    }
    case 'changes': {
      const format = oneOf<ChangesFormat>('format', ctx.flags.format, ['jsonl', 'csv', 'xlsx']) ?? 'jsonl';
      const { round, changes } = await watches.changes(ref, count('round', ctx.flags.round));
      // Standard output stays open after the export: the command's own lines may follow.
      const out = new PassThrough();
      out.pipe(ctx.io.stdout, { end: false });
      await writeChanges(out, changes, format, services.config.csvDelimiter);
      // An empty answer says so, on stderr: stdout stays the export a script reads.
      if (changes.length === 0) ctx.io.stderr.write(`watch ${ref.name}: no changes in round ${round}\n`);
      return 0;
    }
    default:
      throw new UsageError(`no \`vqb watch ${sub}\`; ${USAGE}`);
  }
}

function addRequest(ctx: CommandContext, file: string): WatchRequest {
  const f = ctx.flags;
  const overlap = oneOf<OverlapRule>('overlap', f.overlap, ['wait', 'skip']);
  const notify = oneOf<NotifyRule>('notify', f.notify, ['plate', 'round']);
  const format = oneOf<ChangesFormat>('format', f.format, ['csv', 'jsonl', 'xlsx']);
  const perMonth = count('per-month', f['per-month']);
  const perMonthSpend = amount('per-month-spend', f['per-month-spend']);
  const name =
    str(f.name) ??
    basename(file, extname(file))
      .replace(/[^A-Za-z0-9_-]/g, '-')
      .slice(0, 64);
  const opt = <K extends keyof WatchRequest>(k: K, v: WatchRequest[K] | undefined) =>
    v === undefined ? {} : ({ [k]: v } as Pick<WatchRequest, K>);
  return {
    name,
    ...opt('account', str(f.account)),
    ...opt('pool', str(f.pool)),
    ...opt('every', str(f.every)),
    ...opt('cron', str(f.cron)),
    ...opt('window', str(f.window)),
    ...opt('overlap', overlap),
    ...opt('notify', notify),
    ...opt('callbackUrl', str(f['callback-url'])),
    ...opt(
      'ignore',
      str(f.ignore)
        ?.split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    ),
    ...opt('perMonth', perMonth),
    ...opt('perMonthSpend', perMonthSpend),
    ...opt('format', format),
  };
}

/** The schedule as stored (cron and window in UTC), the window also on the reader's clock (VQ_TIME_ZONE). */
function schedule(v: WatchView, zone: string): string {
  const when = v.cron !== undefined ? `cron "${v.cron}" UTC` : `every ${everyText(v.everyMs ?? 0)}`;
  if (v.window === undefined) return when;
  const utc = zone === 'UTC' || zone === 'Etc/UTC';
  const local = utc ? '' : ` (${windowOnClock(v.window, zone, clock.now())} ${zone})`;
  return `${when}, window ${windowText(v.window)} UTC${local}`;
}

function oneLine(v: WatchView, zone: string): string {
  const why = v.reason ? ` — ${v.reason}` : '';
  return `${v.name}  ${v.account}  ${v.plates} plates  ${schedule(v, zone)}  round ${v.round}  ${v.state}${why}`;
}

function describe(v: WatchView, services: QueueServices): string {
  const price = services.accounts.for(v.account).account.price;
  const budget =
    v.perMonth === undefined
      ? 'no month budget'
      : `month budget ${v.perMonth} creates${
          v.perMonthMoney !== undefined && price
            ? ` (${formatMoney({ amount: v.perMonthMoney, currency: price.currency })})`
            : ''
        }, ${v.spentThisMonth} spent`;
  const lines = [
    `watch ${v.name} (account ${v.account}): ${v.plates} plates, ${schedule(v, services.config.timeZone)}, ` +
      `overlap ${v.overlap}, notify ${v.notify}`,
    `state: ${v.state}${v.reason ? ` — ${v.reason}` : ''}${v.paused ? ' (paused)' : ''}`,
    `${budget}; next round ` +
      `${v.nextAt !== undefined ? whenText(v.nextAt, clock.now(), services.config.timeZone) : '—'}; ` +
      `${v.skipped} skipped`,
  ];
  for (const r of v.rounds.slice(-10))
    lines.push(
      `  round ${r.round}: ${r.plates} plates, batch ${r.batchId}, ${
        r.closedAt === undefined
          ? 'running'
          : r.firstRecord
            ? 'recorded (first round)'
            : `${r.changedPlates} plates changed (${r.changes} fields)${r.export ? `, ${r.export}` : ''}`
      }${r.failed ? `, ${r.failed} failed (their last known results stand)` : ''}`,
    );
  return lines.join('\n');
}
