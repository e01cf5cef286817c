import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { startWorker } from '../../workers/worker.js';
import { type Account, accountOf, type PoolChoice, requireAccountUpstream } from '../accounts/account.js';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import { InputError, UsageError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import { costOf, createsCap, formatMoney, parseAmountMicros } from '../money.js';
import { parseDeadline } from '../plans/deadline.js';
import { batchPlan } from '../plans/projection.js';
import { rateText } from '../presenters/line.js';
import { problemLines } from '../presenters/problems.js';
import { onlyStrandedLeft, strandedKeys, strandedText } from '../presenters/stranded.js';
import { counted, describeBatch, describeSpend, duration, goOnText } from '../presenters/text.js';
import type { CostEstimate } from '../producers/dry-run.js';
import { type BatchRequest, batchIdFor, checkRequest, enqueue, estimate } from '../producers/enqueue.js';
import { checkPlateFile, type PlateFileOptions, plateFileFormat, readPlateFile } from '../producers/plate-file.js';
import type { InputRow } from '../producers/types.js';
import { UNRECOGNISED_ANSWER } from '../queue/answers.js';
import { releaseBatchHold } from '../queue/holds.js';
import { type AccountLine, OPERATOR_PAUSE, type UpstreamOutage } from '../queue/line.js';
import { RedisHealth } from '../redis/health.js';
import type { BatchRef } from '../redis/keys.js';
import { PRIORITY_CLASSES, type PriorityClass } from '../redis/keys.js';
import { openQueueServices, type QueueServices } from '../services.js';
import { parseDuration } from '../setting-values.js';
import { settlesWithin } from '../settle.js';
import { exportBatch, exportSourceFor, fileSinkFor } from '../sinks/export.js';
import { withWords } from '../sinks/reject-words.js';
import type { ExportResult } from '../sinks/types.js';
import { writeUnstored } from '../sinks/unstored.js';
import { zonedText } from '../time-text.js';
import { printable } from '../upstream/bounds.js';
import { answerReader } from '../upstream/response.js';
import { failureText } from '../webhooks/deliveries.js';
import type { Command, CommandContext } from './command.js';
import { EXIT_BLOCKED, EXIT_CAPPED, EXIT_STOPPED } from './exit.js';
import { createProgress, createTicker, type Ticker } from './progress.js';
import { askYes, onTerminal, paidQuestion } from './run-confirm.js';

export { EXIT_BLOCKED, EXIT_CAPPED, EXIT_STOPPED };

/** How long a stopped run waits for its running requests (--shutdown-timeout). */
const DEFAULT_SHUTDOWN_MS = 30_000;

export interface RunOutcome {
  code: number;
  batchId: string;
  files?: { csv?: string; jsonl?: string; rejects?: string; xlsx?: string };
}

/** Ingests the file (or resumes its batch), works it with in-process workers, and exports it. */
export interface RunOptions {
  column?: string;
  /** A pool of keys (VQ_ACCOUNTS_FILE `"pool"`): every key of it serves the batch (docs/plans.md). */
  pool?: string;
  /** An .xlsx file's sheet, by name (default: the first visible). */
  sheet?: string;
  force?: boolean;
  batchId?: string;
  /** Put before the derived id: the demo's batches (`demo-…`) never share an id, or exports, with a real run. */
  batchIdPrefix?: string;
  maxCreates?: number;
  reuseWithinMs?: number;
  dryRun?: boolean;
  account?: string;
  priority?: PriorityClass;
  weight?: number;
  /** --by / --within: when the batch should be finished, epoch ms. */
  deadline?: number;
  /** --require-deadline: refuse the batch when its deadline cannot be met. */
  requireDeadline?: boolean;
  /** --notify: the batch's callbackUrl (its webhooks go there). */
  notify?: string;
  /** --yes (or the demo, which pays nothing): no question on a terminal above VQ_CONFIRM_ABOVE. */
  confirmed?: boolean;
  /** --shutdown-timeout: how long a stop waits for running requests (default 30 s). */
  shutdownTimeoutMs?: number;
  services?: QueueServices;
}

function readOptions(options: RunOptions): PlateFileOptions {
  const { column, sheet } = options;
  return {
    ...(column !== undefined ? { column: /^\d+$/.test(column) ? Number(column) : column } : {}),
    ...(sheet !== undefined ? { sheet } : {}),
  };
}

const UNREADABLE: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOTDIR: 'a part of the path is not a folder',
  ELOOP: 'too many symbolic links',
};

/** A file that can be opened for reading, or INPUT_NOT_FOUND saying why not. */
async function checkReadable(file: string): Promise<void> {
  let reason: string | undefined;
  try {
    await access(file, constants.R_OK);
    if ((await stat(file)).isDirectory()) reason = 'it is a folder, not a file';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    reason = `${UNREADABLE[code] ?? (err as Error).message}${code ? ` (${code})` : ''}`;
  }
  if (reason !== undefined) throw new InputError('INPUT_NOT_FOUND', `cannot read ${file}: ${reason}`);
}

export async function runFile(
  ctx: CommandContext,
  config: Config,
  file: string,
  options: RunOptions,
): Promise<RunOutcome> {
  // The request's own words (--batch-id, --pool, --notify) are checked by the rules every door
  // shares (producers/enqueue.ts), before the file is even read: a pool's home key is where the
  // batch lives, every key of it serves the batch, and a URL this server will not call is refused.
  const {
    pool,
    account: home,
    callbackUrl,
  } = checkRequest(config, {
    ...(options.batchId !== undefined ? { batchId: options.batchId } : {}),
    ...(options.pool !== undefined ? { pool: options.pool } : {}),
    ...(options.account !== undefined ? { account: options.account } : {}),
    ...(options.notify !== undefined ? { callbackUrl: options.notify } : {}),
  });
  // The file the user typed is checked next: it is the likeliest mistake, and its reason is theirs to fix.
  await checkReadable(file);
  const account = accountOf(config, home);
  if (!options.dryRun)
    for (const id of [account.id, ...(pool?.keys ?? [])]) requireAccountUpstream(accountOf(config, id));
  const { ticker, logger, quiet } = runLogging(ctx, config);
  // One view of Redis for this process: an outage is one JSON line, not a block per retry.
  const health = new RedisHealth(logger);
  const services = options.services ?? (await openQueueServices(config, { health }));
  try {
    const name = basename(file);
    // The whole file is read once first: an unusable file fails here, before anything is queued
    // (and paid for), and its sha256 names the batch.
    const format = await plateFileFormat(file);
    if (options.sheet !== undefined && format !== 'xlsx')
      throw new UsageError('--sheet is for an .xlsx workbook; this file is read as CSV');
    const digest = await checkPlateFile(file, format, readOptions(options));
    const batchId =
      options.batchId ?? `${options.batchIdPrefix ?? ''}${batchIdFor(name, digest, options.force === true)}`;
    const the: RunFile = { file, format, name, digest, batchId, account, pool, callbackUrl };
    if (options.dryRun) {
      await dryRunFile(ctx, services, the, options);
      return { code: 0, batchId };
    }
    const line = services.accounts.line(account.id);
    if ((await resumeHeld(ctx, services, account, line)) === 'held') return { code: EXIT_BLOCKED, batchId };
    // The account's own batch of that id: another account's batch of the same id is another batch.
    const ref = { id: batchId, account: account.id };
    if ((await queueFile(ctx, services, the, options)) === 'declined') {
      ctx.print('nothing stored or sent');
      return { code: 1, batchId };
    }

    const worker = startWorker(config, { logger, health });
    const progress = createProgress(ctx.io.stdout, logger, {
      zone: config.timeZone,
      ...(ticker ? { ticker } : quiet ? { print: ctx.print } : {}),
    });
    // Asked for now, so that a second Ctrl-C at any moment reaches this run (see CliIo.forceSignal).
    const forceSignal = ctx.io.forceSignal;
    let code = 0;
    let unstored: { path: string; count: number } | undefined;
    try {
      code = await followRun(ctx, config, services, { the, ref, line, progress, ticker });
      if (code === 0 && callbackUrl !== undefined) await reportNotify(ctx, services, ref, config.webhooks.timeoutMs);
    } finally {
      progress.finish();
      unstored = await stopWorker(ctx, config, worker, { logger, forceSignal, batchId, options });
    }
    if (code === EXIT_CAPPED && !unstored) return await stoppedAtCap(ctx, config, services, the, ref);
    if (code !== 0) {
      if (unstored) {
        ctx.print(
          `${unstored.count} paid results not stored in Redis: ${unstored.path} (keep it: each line ` +
            `holds the plate, its query id and any result; running the batch again without them ` +
            `pays for these plates again)`,
        );
      } else ctx.print('no paid result was left unstored');
      ctx.print(`nothing else is lost: run the same command again to resume batch ${batchId}`);
      return { code, batchId };
    }
    // Every format (the README's "every batch ends as CSV, JSONL and XLSX"), whatever came in.
    const result = await exportBatch(services, fileSinkFor(config), ref);
    ctx.print(describeBatch(await services.batchViews.get(ref), clock.now(), undefined, { zone: config.timeZone }));
    ctx.print(
      `exports:\n  ` +
        [result.files.csv, result.files.jsonl, result.files.rejects, result.files.xlsx]
          .filter((f) => f !== undefined)
          .join('\n  '),
    );
    await reportProblems(ctx, config, services, ref, result.files);
    if (account.price) ctx.print(describeSpend(await services.batchViews.get(batchId), account.price));
    return { code: 0, batchId, files: result.files };
  } finally {
    // A Redis that is gone would hold a polite QUIT forever: a few seconds, then the line is cut.
    if (!options.services) await closeWithin(services, 3_000);
  }
}

/** The file a run works on, as read once at its start. */
interface RunFile {
  file: string;
  format: Awaited<ReturnType<typeof plateFileFormat>>;
  name: string;
  digest: string;
  batchId: string;
  account: Account;
  pool: PoolChoice | undefined;
  callbackUrl: string | undefined;
}

/**
 * The run's logs: the progress (a redrawn line on a terminal, a plain line every 10 s otherwise)
 * says what info logs would; they would only break it up. LOG_LEVEL (or --log-level) set: JSON
 * logs, as asked.
 */
function runLogging(ctx: CommandContext, config: Config) {
  const tty = ctx.io.stdout.isTTY === true;
  const quiet = ctx.io.env.LOG_LEVEL === undefined && config.logLevel === 'info';
  const logConfig: Config = quiet ? { ...config, logLevel: 'warn' } : config;
  // The log lines that remain (warnings) pass the progress line, which steps aside for each.
  const ticker = tty ? createTicker(ctx.io.stdout) : undefined;
  const toStderr = ticker ? ticker.logs(ctx.io.stderr) : undefined;
  // Nobody asked for JSON logs: the warnings that remain read as the rest of the output does.
  const logger = quiet
    ? createLogger({ level: logConfig.logLevel }, humanLogs(toStderr ?? ctx.io.stderr))
    : toStderr
      ? createLogger({ level: logConfig.logLevel }, toStderr)
      : ctx.logger(logConfig);
  return { ticker, logger, quiet };
}

/** `--dry-run`: what the batch would cost and which column holds its plates; nothing stored or sent. */
async function dryRunFile(ctx: CommandContext, services: QueueServices, the: RunFile, options: RunOptions) {
  const { header, rows } = await readPlateFile(the.file, the.format, readOptions(options));
  const estimated = await fileEstimate(services, the, rows, options, {
    ...(options.maxCreates !== undefined ? { maxCreates: options.maxCreates } : {}),
    ...(options.priority !== undefined ? { priority: options.priority } : {}),
    ...(options.deadline !== undefined ? { deadline: options.deadline } : {}),
  });
  ctx.print(describeEstimate(estimated, the.account));
  // The run with the same flags would refuse it (DEADLINE_NOT_FEASIBLE): the dry run says so first.
  if (options.requireDeadline === true && estimated.deadline?.feasibility === 'not feasible')
    ctx.print('  --require-deadline: the run would refuse this batch (exit 2, nothing stored or paid)');
  ctx.print(`  plate column "${header.plateColumn}" (${FOUND_BY[header.plateColumnFoundBy ?? 'content']})`);
}

/**
 * An account paused by a key failure, or held for an answer vqb could not read, resumes when the
 * user runs the command again: that is how a user says "I fixed it". Held and still unreadable:
 * 'held' (nothing is sent). An operator's `vqb pause` is theirs to lift.
 */
async function resumeHeld(
  ctx: CommandContext,
  services: QueueServices,
  account: Account,
  line: AccountLine,
): Promise<'held' | undefined> {
  const state = await line.state();
  if (state.pause?.code === UNRECOGNISED_ANSWER) {
    // Held for an answer vqb could not read: going on pays only when the settings now read it.
    if ((await services.answers.verdict(line, answerReader(account.answers))) === 'unreadable') {
      ctx.io.stderr.write(`vqb: cannot go on: ${printable(state.pause.message)}\n`);
      ctx.print(
        `account ${account.id} stays held: the settings in force do not read the held answer ` +
          `either (nothing was sent)`,
      );
      return 'held';
    }
    ctx.print(
      `account ${account.id} was held for an answer vqb could not read; the settings in force read it: resuming`,
    );
    await services.answers.reopen(account.id);
    await services.webhooks.accountResumed(account.id, await line.resume());
  } else if (state.pause && state.pause.code !== OPERATOR_PAUSE) {
    ctx.print(`account ${account.id} was paused (${state.pause.message}); resuming`);
    await services.webhooks.accountResumed(account.id, await line.resume());
  }
  return undefined;
}

/**
 * The batch of the file: resumed when it was queued before (a new cap applied), else enqueued;
 * 'declined' when the person at the terminal said no to its price (nothing stored).
 */
async function queueFile(
  ctx: CommandContext,
  services: QueueServices,
  the: RunFile,
  options: RunOptions,
): Promise<'declined' | undefined> {
  const { batchId, callbackUrl, account, pool } = the;
  const ref = { id: batchId, account: account.id };
  const existing = (await services.batches.exists(ref)) ? await services.batchViews.get(ref) : undefined;
  // A --batch-id that another file's batch holds: nothing of this file is queued under it.
  if (existing) await services.batches.assertContent(ref, the.digest);
  if (existing && callbackUrl !== undefined) await services.webhooks.retarget(ref, callbackUrl);
  if (existing?.sealed) {
    ctx.print(
      `resuming batch ${batchId}: ` +
        `${existing.counts.done + existing.counts.failed}/${existing.counts.enqueued} already finished`,
    );
    if (options.maxCreates !== undefined && options.maxCreates !== existing.maxCreates) {
      await services.budget.setMaxCreates(existing, options.maxCreates);
      await releaseBatchHold(services, ref);
      const going = goOnText(await services.batchViews.get(ref));
      if (going) ctx.print(`create cap now ${options.maxCreates}${going}`);
    }
    return;
  }
  if (options.confirmed !== true && onTerminal(ctx) && !(await confirmedOnTerminal(ctx, services, the, options)))
    return 'declined';
  const { header, rows } = await readPlateFile(the.file, the.format, readOptions(options));
  const { batch, deadline } = await enqueue(
    services,
    { source: 'file', name: the.name, digest: the.digest, rows, extraColumns: header.extraColumns },
    {
      batchId,
      ...(options.maxCreates !== undefined ? { maxCreates: options.maxCreates } : {}),
      ...(options.reuseWithinMs !== undefined ? { reuseWithinMs: options.reuseWithinMs } : {}),
      account: account.id,
      ...(pool !== undefined ? { pool: pool.name } : {}),
      ...(options.priority !== undefined ? { priority: options.priority } : {}),
      ...(options.weight !== undefined ? { weight: options.weight } : {}),
      ...(options.deadline !== undefined ? { deadline: options.deadline } : {}),
      ...(options.requireDeadline === true ? { requireDeadline: true } : {}),
      ...(callbackUrl !== undefined ? { callbackUrl } : {}),
    },
    {
      onLockWait: (ms) =>
        ctx.print(
          `waiting for another ingest of batch ${batchId} (still running, or stopped without ` +
            `letting go: its lock expires within ${Math.ceil(ms / 1000)} s), then resuming where it stopped`,
        ),
    },
  );
  const c = batch.counts;
  ctx.print(
    `batch ${batchId}: ${counted(c.total, 'row')}, ${counted(c.enqueued, 'plate')} enqueued, ` +
      `${c.rejected} rejected, ${counted(c.duplicates, 'duplicate')} (plate column "${header.plateColumn}")`,
  );
  // On a line of its own (docs/plans.md); not feasible: accepted, and said as a warning.
  if (deadline) ctx.print(deadline.feasibility === 'not feasible' ? `${deadline.line} (warning)` : deadline.line);
}

/** The estimate of the file's batch (producers/enqueue.ts `estimate`), with `extra` of the run's options. */
function fileEstimate(
  services: QueueServices,
  the: RunFile,
  rows: Iterable<InputRow> | AsyncIterable<InputRow>,
  options: RunOptions,
  extra: Pick<BatchRequest, 'maxCreates' | 'priority' | 'deadline'> = {},
): ReturnType<typeof estimate> {
  return estimate(
    services,
    { source: 'file', name: the.name, digest: the.digest, rows },
    {
      batchId: the.batchId,
      account: the.account.id,
      ...(the.pool !== undefined ? { pool: the.pool.name } : {}),
      ...(options.reuseWithinMs !== undefined ? { reuseWithinMs: options.reuseWithinMs } : {}),
      ...extra,
    },
  );
}

/** A new batch above VQ_CONFIRM_ABOVE, on a terminal: the person says yes to its price first. */
async function confirmedOnTerminal(
  ctx: CommandContext,
  services: QueueServices,
  the: RunFile,
  options: RunOptions,
): Promise<boolean> {
  if (services.config.confirmAboveMicros === undefined) return true;
  const { rows } = await readPlateFile(the.file, the.format, readOptions(options));
  // The price alone: the cap is the question's (paidQuestion), priority and deadline change no price.
  const estimated = await fileEstimate(services, the, rows, options);
  const cap = options.maxCreates !== undefined ? { maxCreates: options.maxCreates } : {};
  const question = paidQuestion(services.config, { batchId: the.batchId, account: the.account, ...cap }, estimated);
  return question === undefined || (await askYes(ctx, question));
}

/**
 * Follows the batch until it finishes (0), the user stops the run (EXIT_STOPPED), or its account
 * cannot go on (EXIT_BLOCKED: a key failure, an upstream that does not answer); says along the
 * way what holds it (an operator's pause, its cap) and how it stands against its deadline.
 */
async function followRun(
  ctx: CommandContext,
  config: Config,
  services: QueueServices,
  run: {
    the: RunFile;
    ref: BatchRef;
    line: AccountLine;
    progress: ReturnType<typeof createProgress>;
    ticker: Ticker | undefined;
  },
): Promise<number> {
  const { the, ref, line, progress, ticker } = run;
  const { account, batchId } = the;
  let stopped = false;
  void ctx.io.stopSignal.then(() => {
    stopped = true;
  });
  // An outage recorded before this run (the last run's, nobody has asked since) is not news.
  const startedAt = clock.now();
  // One line each time the run finds its account held by an operator's `vqb pause`: it waits.
  let saidPaused = false;
  let saidAtCap = false;
  let slackAt = 0;
  let slackMs: number | undefined;
  const named = config.accounts.length > 1 || account.id !== 'default';
  const resumeCommand = `vqb resume${named ? ` --account ${account.id}` : ''}`;
  const say = (text: string) => (ticker ? ticker.logs(ctx.io.stdout).write(`${printable(text)}\n`) : ctx.print(text));
  for (;;) {
    // A stop is heard even while a read waits on a Redis that went away at the same moment.
    const read = Promise.all([services.batchViews.get(ref), line.state()]);
    const got = stopped ? undefined : await Promise.race([read, ctx.io.stopSignal.then(() => undefined)]);
    if (got === undefined) {
      read.catch(() => undefined);
      progress.finish();
      ctx.print('stopping: letting running requests finish…');
      return EXIT_STOPPED;
    }
    const [info, now] = got;
    if (now.unreachable && now.unreachable.lastAt < startedAt) delete now.unreachable;
    const operatorPause = now.pause?.code === OPERATOR_PAUSE;
    if (operatorPause && !saidPaused && info.finishedAt === undefined)
      say(`account ${account.id} is paused by an operator (vqb pause): waiting for \`${resumeCommand}\``);
    saidPaused = operatorPause;
    // One line when the batch is held at its cap: it waits (nothing fails), and says how to go on.
    const atCap = info.blocked === 'budget' && info.finishedAt === undefined;
    if (atCap && !saidAtCap) say(atCapText(batchId, info.maxCreates, account));
    saidAtCap = atCap;
    // With a deadline: "on time by 12 min" / "late by 3 min", projected every 2 s.
    if (info.deadline !== undefined && clock.now() - slackAt >= 2_000) {
      slackAt = clock.now();
      slackMs = (await batchPlan(services, info, slackAt))?.verdict.slackMs;
    }
    progress.update(info, now, slackMs);
    if (info.finishedAt !== undefined) return 0;
    // At a cap the user set, with nothing created still running: nothing more can happen until the
    // cap is raised, so the run ends there, as a stop it was asked for (stoppedAtCap).
    if ((atCap || (now.budgetUntil ?? 0) > clock.now()) && info.counts.inflight === 0 && info.sealed) {
      progress.finish();
      return EXIT_CAPPED;
    }
    // Plates paid on a key that stopped wait for that key alone (presenters/stranded.ts): once
    // nothing else of the batch can move, the run ends and says which key and what to do.
    const stranded = info.counts.queued === 0 ? await strandedKeys(services, info) : [];
    if (onlyStrandedLeft(info, stranded)) {
      progress.finish();
      const rest = info.counts.done + info.counts.failed;
      ctx.io.stderr.write(
        `vqb: cannot go on: ${printable(strandedText(stranded).join('\n  '))}\n  the batch's other ` +
          `${counted(rest, 'plate')} are finished; when the key is back, run the same command again to read the rest\n`,
      );
      return EXIT_BLOCKED;
    }
    // A pooled batch goes on with the keys that serve while one of them (its home too) is paused,
    // and stops when none serves.
    if (now.pause && now.pause.code !== OPERATOR_PAUSE && the.pool !== undefined) {
      const others = await Promise.all(the.pool.keys.map((k) => services.accounts.line(k).state()));
      const stopped = others.filter((s) => s.pause !== undefined && s.pause.code !== OPERATOR_PAUSE);
      if (stopped.length === others.length) {
        progress.finish();
        const why = [now, ...stopped].map((s) => `${s.account}: ${s.pause?.message}`).join('\n  ');
        ctx.io.stderr.write(`vqb: cannot go on: no key of pool ${the.pool.name} serves\n  ${printable(why)}\n`);
        return EXIT_BLOCKED;
      }
    }
    if (now.pause && now.pause.code !== OPERATOR_PAUSE && the.pool === undefined) {
      progress.finish();
      ctx.io.stderr.write(`vqb: cannot go on: ${printable(now.pause.message)}\n`);
      return EXIT_BLOCKED;
    }
    // No answer at all to as many requests in a row as one plate may try (VQ_ATTEMPTS): the
    // upstream is down or the address is wrong. Stop, keep every plate as it is, say so.
    if (now.unreachable && now.unreachable.attempts >= config.attempts) {
      progress.finish();
      ctx.io.stderr.write(`vqb: cannot go on: ${unreachableText(now.unreachable, account, config)}\n`);
      return EXIT_BLOCKED;
    }
    await Promise.race([new Promise((r) => clock.setTimeout(r, 500)), ctx.io.stopSignal]);
  }
}

/**
 * The end of a run at a spending cap: the exports of what finished (the rest marked pending), the
 * summary, and how to go on. Exit EXIT_CAPPED (SPENDING_CAP_REACHED in the error table).
 */
/** The rejected rows and failed plates, the first few with why, in VQ_LANG (one more pass over the rows). */
async function reportProblems(
  ctx: CommandContext,
  config: Config,
  services: QueueServices,
  ref: BatchRef,
  files: ExportResult['files'],
): Promise<void> {
  const source = withWords(await exportSourceFor(services, ref), config.lang);
  for (const line of await problemLines(source, config.lang, files)) ctx.print(line);
}

async function stoppedAtCap(
  ctx: CommandContext,
  config: Config,
  services: QueueServices,
  the: RunFile,
  ref: BatchRef,
): Promise<RunOutcome> {
  const { batchId, account } = the;
  const result = await exportBatch(services, fileSinkFor(config), ref);
  const info = await services.batchViews.get(ref);
  const line = await services.accounts.line(account.id).state();
  ctx.print(describeBatch(info, clock.now(), undefined, { zone: config.timeZone }));
  ctx.print(
    `exports (finished plates; the ${counted(info.counts.queued, 'other')} marked pending):\n  ` +
      [result.files.csv, result.files.jsonl, result.files.rejects, result.files.xlsx]
        .filter((f) => f !== undefined)
        .join('\n  '),
  );
  await reportProblems(ctx, config, services, ref, result.files);
  if (account.price) ctx.print(describeSpend(info, account.price));
  const named = config.accounts.length > 1 || account.id !== 'default' ? ` --account ${account.id}` : '';
  const raise =
    info.blocked === 'budget'
      ? `\`vqb budget ${batchId} --max-creates N\`${account.price ? ' (or --max-spend X)' : ''}`
      : `\`vqb budget${named} --per-${line.budgetReason ?? 'day'} N\` ` +
        `(or wait for ${zonedText(line.budgetUntil ?? clock.now(), config.timeZone)})`;
  ctx.print(
    `stopped at the spending cap: ${counted(info.counts.queued, 'plate')} not looked up, nothing lost. ` +
      `To go on, raise the cap with ${raise}, then run the same command again (it resumes batch ${batchId})`,
  );
  return { code: EXIT_CAPPED, batchId, files: result.files };
}

/** The line a run says when its batch reaches its cap: it waits, and how to go on. */
function atCapText(batchId: string, maxCreates: number | undefined, account: Account): string {
  const money = account.price && maxCreates !== undefined ? ` (${formatMoney(costOf(account.price, maxCreates))})` : '';
  return (
    `batch ${batchId} reached its cap of ${maxCreates ?? '?'} ` +
    `creates${money}: its other plates wait; raise it with ` +
    `\`vqb budget ${batchId} --max-creates N\`${account.price ? ' (or --max-spend X)' : ''} and they go on`
  );
}

/**
 * Stops the run's worker, bounded whatever Redis does: past the timeout the connections are cut,
 * and paid answers still waiting for Redis go to a file beside the exports (returned). A second
 * Ctrl-C stops at once, as the timeout would.
 */
async function stopWorker(
  ctx: CommandContext,
  config: Config,
  worker: ReturnType<typeof startWorker>,
  run: { logger: Logger; forceSignal: Promise<string> | undefined; batchId: string; options: RunOptions },
): Promise<{ path: string; count: number } | undefined> {
  const { logger, forceSignal, batchId, options } = run;
  const forced = forceSignal?.then(() => {
    ctx.print('second stop: not waiting for running requests');
  });
  const timeoutMs = options.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_MS;
  const closed = await worker.closeWithin(timeoutMs, forced);
  if (closed.clean) return undefined;
  logger.warn({ timeoutMs, held: closed.held.length }, 'running requests did not finish in time; stopped without them');
  if (closed.held.length === 0) return undefined;
  return { path: await writeUnstored(config.outDir, batchId, closed.held, clock.now()), count: closed.held.length };
}

/** The line a run stops on when its upstream does not answer. */
function unreachableText(outage: UpstreamOutage, account: Account, config: Config): string {
  return (
    `upstream unreachable since ${zonedText(outage.since, config.timeZone, clock.now())}: ${outage.reason}; ` +
    `${outage.attempts} requests in a row got no answer (VQ_ATTEMPTS=${config.attempts}). ` +
    `Check the upstream address ${account.baseUrl} (VQ_BASE_URL) and the network`
  );
}

/**
 * A pino destination for a person: each JSON line becomes `vqb: warning: <msg>` (`vqb: error: …`
 * from level 50 on). The run's progress says what info lines would; what is left is worth a line.
 */
function humanLogs(out: { write(chunk: string): unknown }): { write(chunk: string): void } {
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) {
        if (line.trim() === '') continue;
        try {
          const entry = JSON.parse(line) as { level?: number; msg?: string };
          out.write(`vqb: ${(entry.level ?? 40) >= 50 ? 'error' : 'warning'}: ${entry.msg ?? line}\n`);
        } catch {
          out.write(`${line}\n`);
        }
      }
    },
  };
}

async function closeWithin(services: QueueServices, ms: number): Promise<void> {
  if (!(await settlesWithin(services.close(), ms))) services.redis.disconnect();
}

/**
 * `--notify`: the first attempt of the batch's batch.finished webhook is awaited (it is sent by
 * this process's workers, which stop when the command ends) and its result printed. A receiver
 * that failed is retried by any running `vqb work` or `vqb serve --workers`, under the same id.
 */
async function reportNotify(
  ctx: CommandContext,
  services: QueueServices,
  ref: BatchRef,
  timeoutMs: number,
): Promise<void> {
  const deadline = clock.now() + timeoutMs + 5_000;
  // Each attempt a `vqb work` process records is a message: the wait asks Redis once per attempt.
  const attempts = await services.webhooks.deliveries.attempts(ref, clock);
  try {
    for (;;) {
      const finished = (await services.webhooks.deliveries.list(ref))
        .filter((d) => d.event === 'batch.finished')
        .at(-1);
      if (finished && finished.state === 'delivered') {
        ctx.print(`webhook batch.finished delivered to ${finished.url} (webhook-id ${finished.id})`);
        return;
      }
      if (finished && finished.attempts > 0) {
        const retried =
          finished.state === 'retrying' ? '; a `vqb work` process retries it with the same webhook-id' : '';
        ctx.print(
          `webhook batch.finished not delivered to ${finished.url}: ` +
            `${finished.lastError !== undefined ? failureText(finished.lastError) : finished.state}${retried}`,
        );
        return;
      }
      const left = deadline - clock.now();
      if (left < 0 || attempts === undefined) {
        ctx.print(
          `webhook batch.finished to ${finished?.url ?? 'the --notify URL'} not sent yet; a ` +
            `\`vqb work\` process sends it`,
        );
        return;
      }
      await attempts.next(left + 1);
    }
  } finally {
    attempts?.close();
  }
}

/** --account, --priority and --weight, validated. */
export function schedulingFlags(flags: CommandContext['flags']): {
  account?: string;
  priority?: PriorityClass;
  weight?: number;
} {
  const out: { account?: string; priority?: PriorityClass; weight?: number } = {};
  if (typeof flags.account === 'string') out.account = flags.account;
  if (typeof flags.priority === 'string') {
    if (!(PRIORITY_CLASSES as readonly string[]).includes(flags.priority))
      throw new UsageError('--priority is interactive, normal or bulk');
    out.priority = flags.priority as PriorityClass;
  }
  if (typeof flags.weight === 'string') {
    const n = Number(flags.weight);
    if (!Number.isInteger(n) || n < 1 || n > 1_000)
      throw new UsageError('--weight takes a whole number from 1 to 1000');
    out.weight = n;
  }
  return out;
}

/** --by, --within and --require-deadline, read (plans/deadline.ts): BAD_DEADLINE when they cannot be. */
export function deadlineFlags(
  flags: CommandContext['flags'],
  zone: string,
  now = clock.now(),
): { deadline?: number; requireDeadline?: boolean } {
  const by = typeof flags.by === 'string' ? flags.by : undefined;
  const within = typeof flags.within === 'string' ? flags.within : undefined;
  const deadline = parseDeadline({ by, within }, now, zone);
  if (flags['require-deadline'] === true && deadline === undefined)
    throw new UsageError('--require-deadline needs a deadline: --by 18:00 or --within 2h');
  return {
    ...(deadline !== undefined ? { deadline } : {}),
    ...(flags['require-deadline'] === true ? { requireDeadline: true } : {}),
  };
}

/** --shutdown-timeout, validated. */
function shutdownFlag(flags: CommandContext['flags']): { shutdownTimeoutMs?: number } {
  if (typeof flags['shutdown-timeout'] !== 'string') return {};
  const ms = parseDuration(flags['shutdown-timeout']);
  if (ms === undefined) throw new UsageError('--shutdown-timeout takes a duration such as 30s or 2m');
  return { shutdownTimeoutMs: ms };
}

/** --max-spend 150.00 (or 150,00 / 1.234,50), validated; undefined when absent. */
export function spendFlag(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const micros = parseAmountMicros(value);
  if (micros === undefined)
    throw new UsageError(`--max-spend takes an amount such as 150.00 or 150,00; got ${JSON.stringify(value)}`);
  return micros / 1_000_000;
}

/**
 * A cap in money (--max-spend) as the cap in creates it is at the account's price, the smaller
 * of the two when both are given; NO_PRICE without a price, before any file is read or request sent.
 */
export function capInCreates(
  config: Config,
  flags: CommandContext['flags'],
  caps: { maxCreates?: number; maxSpend?: number },
): { maxCreates?: number } {
  if (caps.maxSpend === undefined) return caps.maxCreates !== undefined ? { maxCreates: caps.maxCreates } : {};
  const account = accountOf(config, typeof flags.account === 'string' ? flags.account : undefined);
  const maxCreates = createsCap(caps, account.price, account.id);
  return maxCreates !== undefined ? { maxCreates } : {};
}

/** --max-creates, --max-spend and --reuse-within, validated. */
export function budgetFlags(flags: CommandContext['flags']): {
  maxCreates?: number;
  maxSpend?: number;
  reuseWithinMs?: number;
} {
  const out: { maxCreates?: number; maxSpend?: number; reuseWithinMs?: number } = {};
  if (typeof flags['max-creates'] === 'string') {
    const n = Number(flags['max-creates']);
    if (!Number.isInteger(n) || n < 0) throw new UsageError('--max-creates takes a whole number (0 or more)');
    out.maxCreates = n;
  }
  const maxSpend = spendFlag(flags['max-spend']);
  if (maxSpend !== undefined) out.maxSpend = maxSpend;
  if (typeof flags['reuse-within'] === 'string') {
    const ms = parseDuration(flags['reuse-within']);
    if (ms === undefined) throw new UsageError('--reuse-within takes a duration such as 24h or 30m');
    out.reuseWithinMs = ms;
  }
  return out;
}

/** How the plate column was chosen, as the dry run says it. */
const FOUND_BY = {
  column: 'as --column asked',
  header: 'by its header',
  content: 'by its content: most of its values are plates',
} as const;
/** The requests' time at the rate in force; an `auto` key that has heard nothing yet has no rate to tell. */
function timeText(e: CostEstimate): string {
  const at = `${duration(e.secondsAtRate * 1000)} at ${rateText(e.ratePerSecond)}`;
  if (e.rateSource === 'start')
    return (
      `about ${at} if it stayed there: no limit heard from the upstream yet ` +
      `(a new key starts at ${rateText(e.ratePerSecond)}; its first answers usually announce the real one)`
    );
  return `about ${at}${e.rateSource === 'configured' ? '' : ` (the rate ${e.rateSource} so far)`}`;
}

export function describeEstimate(e: CostEstimate, account: Account): string {
  return [
    `dry run for batch ${e.batchId} (no upstream request made):`,
    `  ${counted(e.rows, 'row')}: ${counted(e.plates, 'distinct valid plate')}, ${e.rejected} rejected, ` +
      counted(e.duplicates, 'duplicate'),
    `  ${e.alreadyFinished} already finished in this batch, ${e.reusable} answered from stored results`,
    `  would create ${e.creates} queries and make about ${e.expectedPolls} polls (${e.expectedRequests} requests)`,
    `  ${timeText(e)} (account ` +
      `${account.id})` +
      (e.daysAtCap !== undefined ? `; ${e.daysAtCap} day(s) under the cap of ${account.perDay} creates per day` : ''),
    `  first results after about ${duration(e.firstPollSeconds * 1000)} (each query's first poll)`,
    ...(e.maxCreates !== undefined && e.maxCreates < e.creates
      ? [
          `  the batch's cap holds it at ${e.maxCreates} creates; the other ` +
            `${e.creates - e.maxCreates} plates would wait`,
        ]
      : []),
    ...(e.cost ? [`  cost: ${costLine(e)}`] : []),
    ...(e.deadline ? [e.deadline.line] : []),
  ].join('\n');
}

/** `R$ 350,00 (1000 queries × R$ 0,35; polls free)`. */
function costLine(e: CostEstimate): string {
  const cost = e.cost!;
  const creates = e.maxCreates !== undefined ? Math.min(e.creates, e.maxCreates) : e.creates;
  const perQuery = formatMoney({ amount: cost.perQuery, currency: cost.currency });
  const polls =
    cost.perPoll > 0
      ? ` + polls at ${formatMoney({ amount: cost.perPoll, currency: cost.currency })}`
      : '; polls not charged, see VQ_PRICE_PER_POLL';
  return `${formatMoney(cost)} (${creates} queries × ${perQuery}${polls})`;
}

export const runCommand: Command = {
  handlesStop: true,
  usage: `vqb run <file.csv|file.xlsx> [--sheet NAME] [--out DIR] [--column NAME|N] [--force] [--batch-id ID]
             [--account A] [--priority interactive|normal|bulk] [--weight N]
             [--by 18:00 | --within 2h] [--require-deadline]
             [--dry-run] [--max-creates N] [--max-spend 150.00] [--reuse-within 24h] [--notify URL]
  Reads the CSV (delimiter, encoding and plate column detected), creates the batch (its id comes
  from the file's content, so running the same file again resumes it instead of paying again;
  --force starts a new batch), runs workers in this process and writes <out>/<batch>.csv,
  <batch>.rejects.csv, <batch>.jsonl and <batch>.xlsx when every plate has an outcome. An Excel
  .xlsx (told by its extension or content) is read from its first visible sheet, or --sheet NAME,
  with the same header rules.
  On a terminal, a new batch that would cost more than VQ_CONFIRM_ABOVE (default 100: R$ 100 with a
  price per query, else 100 creates) is asked about first (--yes: not asked); without a terminal
  nothing is asked.
  Exit codes: 0 finished; 1 declined at the question (nothing stored); 3 the line cannot go on (key
  invalid/expired, missing permission, an upstream answer vqb cannot read: UNRECOGNISED_ANSWER, set
  VQ_ANSWER_* / VQ_STATES_* and run again); 4 stopped at a spending cap you set
  (SPENDING_CAP_REACHED: exports of what finished, the rest pending; raise it with vqb budget and run
  again); 130 stopped by Ctrl-C (run it again to resume); 2 bad usage or settings.
  --yes           no question on a terminal, whatever the batch costs
  --dry-run       read, validate and dedup, print what the batch would cost; no upstream call
  --max-creates N this batch never creates more than N queries; it waits (never fails) at the cap,
                  and running again with a higher N continues it
  --max-spend X   the same cap in money (the account's currency): X ÷ the price per query, whole
                  creates (needs VQ_PRICE_PER_QUERY or the account's pricePerQuery); with
                  --max-creates the smaller holds
  --reuse-within  answer plates from results paid this recently by any batch of the account (kept
                  VQ_REUSE_KEEP, while that batch is), free (e.g. 24h)
  --account A     the account (upstream key, VQ_ACCOUNTS_FILE) the batch uses; default: the first
  --pool NAME     every key of pool NAME (accounts with "pool": "NAME") serves the batch, each at
                  its own rate; with --account, that key is the batch's home (docs/plans.md)
  --priority      interactive (a person waits, small batches), normal (default) or bulk
  --weight N      share of the account's rate relative to the other batches of its class (default 1)
  --by T          a deadline: 18:00 (local time, today or else tomorrow) or an ISO instant; said on
                  a line of its own, \`deadline: feasible …\` / \`not feasible …\` / \`unknown …\`, with
                  the ETA and cost ranges; the batch is scheduled to meet it (docs/plans.md)
  --within D      a deadline as a span from now: 90m, 2h, 1h30m
  --require-deadline  refuse the batch (exit 2, nothing stored or paid) when its deadline cannot be met
  --shutdown-timeout D  on Ctrl-C/SIGTERM, how long running requests may take to finish and be
                  stored (default 30s); past it the run ends, and paid answers Redis did not take
                  are written to <out>/<batch>.unstored-<time>.jsonl
  --notify URL    send the batch's signed webhooks there (batch.finished; account.paused while it
                  waits on a paused key); needs VQ_WEBHOOK_SECRET, and the host on VQ_WEBHOOK_ALLOW`,
  options: {
    column: { type: 'string' },
    sheet: { type: 'string' },
    force: { type: 'boolean' },
    'batch-id': { type: 'string' },
    'dry-run': { type: 'boolean' },
    'max-creates': { type: 'string' },
    'max-spend': { type: 'string' },
    'reuse-within': { type: 'string' },
    account: { type: 'string' },
    pool: { type: 'string' },
    priority: { type: 'string' },
    weight: { type: 'string' },
    by: { type: 'string' },
    within: { type: 'string' },
    'require-deadline': { type: 'boolean' },
    notify: { type: 'string' },
    'shutdown-timeout': { type: 'string' },
    yes: { type: 'boolean' },
  },
  async run(ctx) {
    const [file, ...extra] = ctx.args;
    if (!file || extra.length > 0) throw new UsageError('vqb run takes one CSV or .xlsx file (see `vqb run --help`)');
    const config = ctx.config();
    const { maxSpend, maxCreates, ...budget } = budgetFlags(ctx.flags);
    const outcome = await runFile(ctx, config, file, {
      ...(typeof ctx.flags.column === 'string' ? { column: ctx.flags.column } : {}),
      ...(typeof ctx.flags.sheet === 'string' ? { sheet: ctx.flags.sheet } : {}),
      force: ctx.flags.force === true,
      dryRun: ctx.flags['dry-run'] === true,
      ...(typeof ctx.flags['batch-id'] === 'string' ? { batchId: ctx.flags['batch-id'] } : {}),
      ...budget,
      ...capInCreates(config, ctx.flags, {
        ...(maxCreates !== undefined ? { maxCreates } : {}),
        ...(maxSpend !== undefined ? { maxSpend } : {}),
      }),
      ...schedulingFlags(ctx.flags),
      ...deadlineFlags(ctx.flags, config.timeZone),
      ...(typeof ctx.flags.notify === 'string' ? { notify: ctx.flags.notify } : {}),
      ...(typeof ctx.flags.pool === 'string' ? { pool: ctx.flags.pool } : {}),
      ...shutdownFlag(ctx.flags),
      ...(ctx.flags.yes === true ? { confirmed: true } : {}),
    });
    return outcome.code;
  },
};
