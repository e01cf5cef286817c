// `npm run bench [-- --quick] [-- --only pacing,overload,…]`: vqb against a naive peer under the
// same simulated upstream, then vqb's scheduling (an interactive plate under bulk load, shares
// between batches), its pacing per account, and Redis per queued plate, as ratios from one run. A full run writes
// bench/results.json and bench/RESULTS.md; --quick and --only runs write to out/bench/ instead, so
// a smoke test never overwrites the figures of a real run.
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.js';
import { measureAccountPacing } from './accounts.js';
import { clusterSettings, measureCluster } from './cluster.js';
import { coldMain } from './cold.js';
import { BENCH_KEY, connect, deleteByPrefix, machineInfo, prefixesInUse } from './common.js';
import { deadlineSettings, measureDeadlines } from './deadlines.js';
import { measureEventLoop } from './event-loop.js';
import { measureFinished } from './finished.js';
import { measureIngest } from './ingest.js';
import { type LearnedRun, learnedScenarios, measureLearned } from './learned.js';
import { manyAccountsSettings, measureManyAccounts } from './many-accounts.js';
import { measurePool, poolSettings } from './pool.js';
import { startSimChild, stopAllChildren } from './procs.js';
import { type BenchResults, writeResults } from './report.js';
import { measureScale, scaleSettings } from './scale.js';
import { measureInteractive, measureShares } from './scheduling.js';
import { type ClientSpec, measureBatch, measureWindow, type StepContext } from './upstream.js';

const STEPS = [
  'pacing',
  'overload',
  'makespan',
  'interactive',
  'shares',
  'accounts',
  'scaleout',
  'minute',
  'ingest',
  'finished',
  'eventloop',
  'learned',
  'deadlines',
  'scale',
  'many',
  'cluster',
  'pool',
  'pool-baseline',
] as const;
type Step = (typeof STEPS)[number];
const ALIASES: Record<string, Step[]> = {
  requests: ['makespan'],
  footprint: ['makespan', 'ingest'],
  cpu: ['makespan'],
  memory: ['ingest', 'finished'],
  queued: ['ingest'],
  scheduling: ['interactive', 'shares'],
  'per-account': ['accounts', 'scaleout', 'minute'],
};

const USAGE = `node dist/bench/run.js [--quick] [--only ${STEPS.join('|')}[,…]] | --cold [--full]
  --cold    the cold-start gate: each scenario from an empty Redis against answers of 1-3 s, checked
            against bench/cold-thresholds.json (exit 1 naming each figure that misses); --full: the
            issue's longer windows and sizes; --tracing: the same cold batch with OpenTelemetry
            off and on (ratio 1.0), CPU and Redis commands per plate
  --quick   scaled down (10 s windows and intervals, 200-plate batch, 100k-row ingest, 100 accounts in many
            and cluster) for smoke tests
  --only    run only these steps (requests → makespan, footprint → makespan + ingest, memory and
            queued → ingest, scheduling → interactive + shares, per-account → accounts + scaleout + minute)`;

/** R, the upstream's limit in requests per second, and the simulated completion range. */
const R = 20;
const COMPLETION_MS: [number, number] = [2_000, 6_000];

/** The per-account pacing runs: each account's key has this limit at the simulator, and vqb is configured with it. */
const TWO_ACCOUNTS = [
  { id: 'slow', rateLimit: '10/s' },
  { id: 'fast', rateLimit: '20/s' },
];
const SCALE_OUT = { id: 'default', rateLimit: `${R}/s` };
const PER_MINUTE = { id: 'minute', rateLimit: '300/min' };

function scale(quick: boolean) {
  return quick
    ? {
        warmupMs: 2_000,
        windowMs: 10_000,
        backlogPlates: 300,
        batchPlates: 200,
        ingestRows: 100_000,
        finishedPlates: 5_000,
        eventLoopRows: 20_000,
        interactive: { bulkPlates: 5_000, warmupMs: 5_000, rounds: 2, gapMs: 1_000, settleMs: 12_000 },
        shares: { offsetMs: 10_000, intervalMs: 10_000, intervals: 2 },
        perMinute: { warmupMs: 3_000, windowMs: 30_000 },
      }
    : {
        warmupMs: 3_000,
        windowMs: 60_000,
        backlogPlates: 1_500,
        batchPlates: 1_000,
        ingestRows: 1_000_000,
        finishedPlates: 20_000,
        eventLoopRows: 100_000,
        interactive: { bulkPlates: 5_000, warmupMs: 15_000, rounds: 5, gapMs: 2_000, settleMs: 12_000 },
        shares: { offsetMs: 30_000, intervalMs: 30_000, intervals: 3 },
        perMinute: { warmupMs: 5_000, windowMs: 150_000 },
      };
}

function selectedSteps(only: string | undefined): Step[] {
  if (only === undefined) return [...STEPS];
  const picked = new Set<Step>();
  for (const name of only
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const steps = ALIASES[name] ?? (STEPS.includes(name as Step) ? [name as Step] : undefined);
    if (!steps) throw new Error(`unknown step "${name}"\n${USAGE}`);
    for (const s of steps) picked.add(s);
  }
  return STEPS.filter((s) => picked.has(s));
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      only: { type: 'string' },
      cold: { type: 'boolean' },
      full: { type: 'boolean' },
      tracing: { type: 'boolean' },
      help: { type: 'boolean' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  // The cold-start gate: its own redis-servers and simulators, its own thresholds (bench/cold.ts).
  if (values.cold) return coldMain(values.full === true, values.tracing === true);
  const quick = values.quick === true;
  const steps = selectedSteps(values.only);
  const s = scale(quick);
  const started = Date.now();
  const log = (line: string) => void process.stderr.write(`${line}\n`);

  const redis = connect();
  let interrupted = false;
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    log('interrupted: stopping children and deleting bench keys…');
    void (async () => {
      await stopAllChildren();
      for (const prefix of [...prefixesInUse]) await deleteByPrefix(redis, prefix).catch(() => 0);
      process.exit(130);
    })();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const ours = loadConfig({}, { VQ_RATE_LIMIT: `${R}/s` });
  const peerDefaults = { pollMs: 2_000, intervalMs: 1_000, concurrencyPerCap: 3 };
  const simFlags = [
    '--rate-limit',
    `${R}/s`,
    '--window',
    'sliding',
    '--completion',
    `${COMPLETION_MS[0]}-${COMPLETION_MS[1]}`,
    '--key',
    `${BENCH_KEY}:all`,
    '--daily-quota',
    '1000000000',
  ];
  const results: BenchResults = {
    date: new Date().toISOString(),
    quick,
    only: values.only === undefined ? null : steps,
    durationS: 0,
    machine: await machineInfo(redis),
    settings: {
      R,
      simulator: {
        command: `vqb simulate ${simFlags.join(' ').replace(BENCH_KEY, '<key>')}`,
        rateLimit: `${R}/s`,
        window: 'sliding',
        completionMs: COMPLETION_MS,
      },
      vqb: {
        process: 'vqb work (child process), env settings only',
        rateLimit: `${R}/s at R, ${2 * R}/s at 2R`,
        pacingJitterMs: ours.pacingJitterMs,
        concurrency: ours.concurrency,
        maxInFlight: ours.maxInFlight,
        poll: ours.poll,
      },
      peer: {
        intervalCap: `${R} at R, ${2 * R} at 2R`,
        intervalMs: peerDefaults.intervalMs,
        window: 'fixed (opens at its first request)',
        concurrency: `${peerDefaults.concurrencyPerCap} × intervalCap`,
        pollMs: peerDefaults.pollMs,
        on429: 'sleep Retry-After seconds, retry',
      },
      pacing: { warmupMs: s.warmupMs, windowMs: s.windowMs, backlogPlates: s.backlogPlates },
      batch: { plates: s.batchPlates, lowerBound: '2 × plates ÷ R + 6 s' },
      interactive: { ...s.interactive, workers: 1, rateLimit: `${R}/s` },
      shares: {
        ...s.shares,
        workers: 1,
        rateLimit: `${R}/s`,
        weights: [
          [1, 1],
          [3, 1],
        ],
      },
      accounts: { workers: 3, accounts: TWO_ACCOUNTS, window: 'sliding', warmupMs: s.warmupMs, windowMs: s.windowMs },
      scaleout: { workers: 4, accounts: [SCALE_OUT], window: 'sliding', warmupMs: s.warmupMs, windowMs: s.windowMs },
      minute: { workers: 1, accounts: [PER_MINUTE], window: 'sliding', ...s.perMinute },
      ingest: { rows: s.ingestRows, chunk: 1_000 },
      finished: { plates: s.finishedPlates },
      eventloop: { rows: s.eventLoopRows },
      learned: learnedScenarios(quick).map((x) => ({ name: x.name, minutes: x.minutes })),
      scale: scaleSettings(quick),
      deadlines: deadlineSettings(quick),
      many: manyAccountsSettings(quick),
      cluster: clusterSettings(quick),
    },
    steps: [],
    errors: [],
  };

  const sim = await startSimChild(simFlags);
  let plateCursor = 0;
  const ctx: StepContext = {
    sim,
    redis,
    allocatePlates(count) {
      const from = plateCursor;
      plateCursor += count;
      return from;
    },
    log,
  };
  const spec = (who: ClientSpec['who'], label: string, rate: number, plates: number): ClientSpec => ({
    who,
    label,
    rate,
    plates,
    ...(who === 'peer'
      ? { peer: { concurrency: rate * peerDefaults.concurrencyPerCap, pollMs: peerDefaults.pollMs } }
      : {}),
  });

  const attempt = async <T>(name: string, fn: () => Promise<T>): Promise<T | undefined> => {
    if (interrupted) return undefined;
    const t = Date.now();
    log(`→ ${name}`);
    try {
      const value = await fn();
      const seconds = (Date.now() - t) / 1000;
      results.steps.push({ name, seconds, load1: loadavg()[0]! });
      log(`  ${name}: ${seconds.toFixed(0)} s`);
      return value;
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      results.errors.push(`${name}: ${message.split('\n')[0]}`);
      log(`  ${name} FAILED: ${message}`);
      return undefined;
    }
  };
  /** vqb's and the peer's figures; a failed run's side is absent (not undefined). */
  const pair = <T>(vqb: T | undefined, peer: T | undefined): { vqb?: T; peer?: T } => ({
    ...(vqb ? { vqb } : {}),
    ...(peer ? { peer } : {}),
  });

  try {
    for (const step of steps) {
      switch (step) {
        case 'pacing':
          results.pacing = pair(
            await attempt('pacing at R: vqb', () =>
              measureWindow(ctx, spec('vqb', 'pacing-vqb', R, s.backlogPlates), s.warmupMs, s.windowMs),
            ),
            await attempt('pacing at R: peer', () =>
              measureWindow(ctx, spec('peer', 'pacing-peer', R, s.backlogPlates), s.warmupMs, s.windowMs),
            ),
          );
          break;
        case 'overload':
          results.overload = pair(
            await attempt('configured at 2R: vqb', () =>
              measureWindow(ctx, spec('vqb', 'overload-vqb', 2 * R, s.backlogPlates), s.warmupMs, s.windowMs),
            ),
            await attempt('configured at 2R: peer', () =>
              measureWindow(ctx, spec('peer', 'overload-peer', 2 * R, s.backlogPlates), s.warmupMs, s.windowMs),
            ),
          );
          break;
        case 'makespan': {
          const lowerBoundS = (2 * s.batchPlates) / R + COMPLETION_MS[1] / 1000;
          const timeoutMs = Math.max(120_000, 4 * lowerBoundS * 1000);
          results.makespan = {
            lowerBoundS,
            ...pair(
              await attempt(`batch of ${s.batchPlates}: vqb`, () =>
                measureBatch(ctx, spec('vqb', 'batch-vqb', R, s.batchPlates), timeoutMs),
              ),
              await attempt(`batch of ${s.batchPlates}: peer`, () =>
                measureBatch(ctx, spec('peer', 'batch-peer', R, s.batchPlates), timeoutMs),
              ),
            ),
          };
          break;
        }
        case 'interactive': {
          const interactive = await attempt(
            `interactive 1-plate batches under a ${s.interactive.bulkPlates.toLocaleString('en')}-plate batch`,
            () => measureInteractive(ctx, { rate: R, ...s.interactive, answersMs: COMPLETION_MS }),
          );
          if (interactive) results.interactive = interactive;
          break;
        }
        case 'shares': {
          const run = (weights: [number, number]) =>
            attempt(`shares, weights ${weights.join(':')}`, () =>
              measureShares(ctx, `shares-${weights.join('to')}`, { rate: R, weights, ...s.shares }),
            );
          const equal = await run([1, 1]);
          const weighted = await run([3, 1]);
          results.shares = { ...(equal ? { equal } : {}), ...(weighted ? { weighted } : {}) };
          break;
        }
        case 'accounts': {
          const run = await attempt('two accounts (10/s, 20/s), three workers', () =>
            measureAccountPacing(ctx, {
              label: 'accounts',
              workers: 3,
              accounts: TWO_ACCOUNTS,
              warmupMs: s.warmupMs,
              windowMs: s.windowMs,
              completionMs: COMPLETION_MS,
            }),
          );
          if (run) results.accounts = run;
          break;
        }
        case 'scaleout': {
          const run = await attempt(`four workers, one account at ${R}/s`, () =>
            measureAccountPacing(ctx, {
              label: 'scaleout',
              workers: 4,
              accounts: [SCALE_OUT],
              warmupMs: s.warmupMs,
              windowMs: s.windowMs,
              completionMs: COMPLETION_MS,
            }),
          );
          if (run) results.scaleOut = run;
          break;
        }
        case 'minute': {
          const run = await attempt('one account at 300/min', () =>
            measureAccountPacing(ctx, {
              label: 'minute',
              workers: 1,
              accounts: [PER_MINUTE],
              ...s.perMinute,
              completionMs: COMPLETION_MS,
            }),
          );
          if (run) results.perMinute = run;
          break;
        }
        case 'ingest': {
          const ingest = await attempt(`ingest of ${s.ingestRows.toLocaleString('en')} rows`, () =>
            measureIngest(ctx, s.ingestRows),
          );
          if (ingest) results.ingest = ingest;
          break;
        }
        case 'finished': {
          const finished = await attempt(`${s.finishedPlates.toLocaleString('en')} finished plates`, () =>
            measureFinished(ctx, s.finishedPlates),
          );
          if (finished) results.finished = finished;
          break;
        }
        case 'learned': {
          const runs: LearnedRun[] = [];
          for (const scenario of learnedScenarios(quick)) {
            const run = await attempt(`learned limit: ${scenario.name}`, () => measureLearned(ctx, scenario));
            if (run) runs.push(run);
          }
          results.learned = runs;
          break;
        }
        case 'scale': {
          const scale = await attempt('cost follows work: idle accounts, then per plate beside BullMQ by hand', () =>
            measureScale(ctx, scaleSettings(quick)),
          );
          if (scale) {
            results.scale = scale;
            results.errors.push(...scale.errors.map((e) => `scale: ${e}`));
          }
          break;
        }
        case 'deadlines': {
          const run = await attempt('deadlines: ETA ranges, and three batches with deadlines on one learned key', () =>
            measureDeadlines(ctx, deadlineSettings(quick)),
          );
          if (run) results.deadlines = run;
          break;
        }
        case 'many': {
          const settings = manyAccountsSettings(quick);
          const many = await attempt(
            `${settings.accounts.toLocaleString('en')} accounts, ${settings.workers} processes, a ${settings.platesPerAccount}-plate batch each`,
            () => measureManyAccounts(ctx, settings),
          );
          if (many) results.many = many;
          break;
        }
        case 'cluster': {
          const settings = clusterSettings(quick);
          const cluster = await attempt(
            `${settings.accounts.toLocaleString('en')} accounts on one Redis, then on a ${settings.masters}-master cluster`,
            () => measureCluster(ctx, settings),
          );
          if (cluster) results.cluster = cluster;
          break;
        }
        case 'pool': {
          const settings = poolSettings(quick);
          const pool = await attempt(
            `a pool of keys at 10, 20 and 30/s (learned), a ${settings.plates.toLocaleString('en')}-plate batch, the 30/s key expiring mid-batch`,
            () => measurePool(ctx, settings),
          );
          if (pool) results.pool = pool;
          break;
        }
        case 'pool-baseline': {
          const baseline = await attempt("the pool bench's three keys unpooled, a batch each, the same window", () =>
            measurePool(ctx, { ...poolSettings(quick), baseline: true }),
          );
          if (baseline) results.poolBaseline = baseline;
          break;
        }
        case 'eventloop': {
          const loop = await attempt(`event-loop blocks over ${s.eventLoopRows.toLocaleString('en')} rows`, () =>
            measureEventLoop(ctx, s.eventLoopRows),
          );
          if (loop) results.eventLoop = loop;
          break;
        }
      }
    }
  } finally {
    await sim.stop();
    await stopAllChildren();
    for (const prefix of [...prefixesInUse]) await deleteByPrefix(redis, prefix).catch(() => 0);
    await redis.quit();
  }
  if (interrupted) return 130;

  results.durationS = (Date.now() - started) / 1000;
  const full = !quick && values.only === undefined;
  const dir = fileURLToPath(new URL(full ? '../../bench/' : '../../out/bench/', import.meta.url));
  const table = await writeResults(results, R, `${dir}results.json`, `${dir}RESULTS.md`);
  process.stdout.write(`\n${table}\n\n`);
  if (results.errors.length > 0)
    process.stdout.write(`failed steps:\n${results.errors.map((e) => `  ${e}`).join('\n')}\n`);
  process.stdout.write(`written: ${dir}RESULTS.md, ${dir}results.json (${Math.round(results.durationS)} s)\n`);
  return results.errors.length > 0 ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
    void stopAllChildren().finally(() => process.exit(1));
  },
);
