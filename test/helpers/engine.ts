// A real pipeline for integration tests: the simulator on a loopback port, a Redis prefix of the
// test's own, in-process workers, and the queue services producers use.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Dispatcher } from 'undici';
import { afterAll, afterEach } from 'vitest';
import type { Clock } from '../../src/clock.js';
import type { Config, Overrides } from '../../src/config.js';
import type { PlateQueue } from '../../src/queue/account-queues.js';
import { CreateAdmission } from '../../src/queue/admission.js';
import type { IngestRow } from '../../src/queue/batch/store.js';
import type { AccountLine } from '../../src/queue/line.js';
import type { PriorityClass } from '../../src/queue/types.js';
import { openQueueServices, type QueueServices } from '../../src/services.js';
import { type SimulatorHandle, type SimulatorOptions, startSimulator } from '../../src/simulator/index.js';
import type { KeySpec } from '../../src/simulator/options.js';
import type { Resolve } from '../../src/webhooks/address.js';
import { AccountFlow, type FlowDeps } from '../../workers/flow.js';
import { startWorker, type WorkerHandle } from '../../workers/worker.js';
import { testConfig } from './config.js';
import { type CapturedLogs, captureLogs } from './logs.js';
import { type RedisTestContext, redisTestContext } from './redis.js';

export const TEST_KEY = 'test-key-0123456789abcdef';

/**
 * The pacing allowance for a test whose simulator shares a process (and two cores) with its
 * harness, beside worker processes, Redis and other test files. Its event loop adds tens of ms, at
 * times hundreds, to when the simulator sees a request, so requests sent on their slots reach it
 * bunched: the default 25 ms drew one 429 at a configured 50/s in a CI run. The default is
 * measured in the benchmark, where the simulator has a process of its own; the README says when to
 * raise it. Longer stalls still happen (351 ms, with five files and seven worker processes at
 * once): refusalsNotFromStalls tells their 429s from the client's. What such a test shows holds at
 * any allowance (no 429 of the client's making, every plate once); the exact window's arithmetic
 * is pace-clock.test.ts's, on a clock it owns.
 */
export const BUSY_HOST_MS = 150;
export const BUSY_HOST = { VQ_PACING_JITTER: `${BUSY_HOST_MS}ms` } as const;

export { refusalsNotFromStalls } from '../../src/simulator/stall-watch.js';

/** Where a test's batch goes: its account (the first configured by default), class and weight. */
export interface BatchPlace {
  account?: string;
  priority?: PriorityClass;
  weight?: number;
}

export interface Harness {
  sim: SimulatorHandle;
  config: Config;
  services: QueueServices;
  logs: CapturedLogs;
  redis: RedisTestContext;
  keyFile: string;
  /** VQ_ACCOUNTS_FILE, when the harness has accounts. */
  accountsFile?: string;
  /** The key file of an account of the harness (write a new key there to rotate it). */
  keyFileOf(accountId: string): string;
  workers: WorkerHandle[];
  /** The first account's line and queue (the only ones without VQ_ACCOUNTS_FILE). */
  line: AccountLine;
  queue: PlateQueue;
  /** True when no plate is waiting to be fed, queued, between polls or running, on any account. */
  idle(): Promise<boolean>;
  /** `random`: what the worker process draws its jitters from (rests, pacing), for a test that needs them at an end. */
  /** A worker in this process; `clock` puts all of its timers and `now` on a clock the test owns. */
  /** `activeReadEveryMs`: how often it reads the active set (set long: it must hear of accounts with work). */
  startWorker(deps?: { random?: () => number; clock?: Clock; activeReadEveryMs?: number }): WorkerHandle;
  /** Opens an empty batch, as a producer's first step does (what a process killed mid-ingest leaves). */
  open(batchId: string, options?: BatchPlace): Promise<void>;
  /** Stores a batch the way ingest does (rows, counts, scheduler) and puts its first plates on the queue. */
  enqueue(batchId: string, plates: string[], options?: BatchPlace): Promise<void>;
  waitForBatch(batchId: string, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** An account of the harness: its own key in the simulator (with the key spec's limits) and in a key file. */
export interface HarnessAccount {
  id: string;
  /** The simulator's view of the key: its own rate limit, quota, expiry. */
  key?: Partial<KeySpec>;
  /** vqb's view: the account's configured rate limit (default: VQ_RATE_LIMIT). */
  rateLimit?: string;
  /** More fields of the account's entry in VQ_ACCOUNTS_FILE (pricePerQuery, currency, …). */
  fields?: Record<string, unknown>;
  maxCreatesPerDay?: number;
  tokens?: string[];
  shareResults?: boolean;
}

export function accountKey(id: string): string {
  return `test-key-${id}-0123456789abcdef`;
}

let simulatorWarm: Promise<void> | undefined;

/**
 * The in-process simulator compiles its request path on the first request it serves: measured on
 * the 2-core machine under a parallel run, 15-20 ms in which this process (workers included)
 * serves nothing, so the first requests of a test's accounts were counted that much after they
 * were written and the 21st of a 20/s key met 20 in its window (a 429 a real, warm upstream does
 * not give). A throwaway simulator serves a create and a poll once per test process; the test's
 * own simulator starts with nothing counted, drawn or stored.
 */
function warmSimulatorCode(): Promise<void> {
  simulatorWarm ??= (async () => {
    const sim = await startSimulator({ completionMs: [0, 0] });
    try {
      const headers = { 'x-api-key': 'demo-key', 'content-type': 'application/json' };
      for (let i = 0; i < 3; i++) {
        const created = await fetch(`${sim.url}/queries/integration/agregados`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ keys: { licensePlate: 'ABC1D23' } }),
        });
        const body = (await created.json()) as { body?: { queryId?: string }; queryId?: string };
        const id = body.body?.queryId ?? body.queryId ?? 'unknown';
        await (await fetch(`${sim.url}/queries/integration/${id}`, { headers })).text();
      }
    } finally {
      await sim.close();
    }
  })();
  return simulatorWarm;
}

export async function startHarness(
  options: {
    sim?: Partial<SimulatorOptions>;
    config?: Overrides;
    label?: string;
    /**
     * A Redis of the test's own (a dedicated server's URL): for a test that reads the server's
     * own counters (INFO), which the shared server's other users (the other lane) would move.
     */
    redisUrl?: string;
    workers?: number;
    accounts?: HarnessAccount[];
    /** The workers' HTTP dispatcher toward the simulator (default: each account's own keep-alive Agent). */
    dispatcher?: Dispatcher;
    /** How webhook host names resolve, for the producers and the workers (default dns.lookup). */
    resolve?: Resolve;
  } = {},
): Promise<Harness> {
  await warmSimulatorCode();
  const redis = await redisTestContext(options.label, options.redisUrl);
  const accountKeys: KeySpec[] = (options.accounts ?? []).map((a) => ({
    ...a.key,
    key: accountKey(a.id),
    label: a.id,
  }));
  const sim = await startSimulator({
    completionMs: [100, 300],
    rateLimit: '1000/s',
    keys: [{ key: TEST_KEY }, ...accountKeys],
    ...options.sim,
  });
  const dir = await mkdtemp(join(tmpdir(), 'vqb-test-'));
  const keyFile = join(dir, 'api-key');
  await writeFile(keyFile, `${TEST_KEY}\n`);
  const accountsFile: Overrides = {};
  if (options.accounts) {
    const accounts = [];
    for (const a of options.accounts) {
      const file = join(dir, `key-${a.id}`);
      await writeFile(file, `${accountKey(a.id)}\n`);
      accounts.push({
        id: a.id,
        apiKeyFile: file,
        ...a.fields,
        ...(a.rateLimit ? { rateLimit: a.rateLimit } : {}),
        ...(a.maxCreatesPerDay !== undefined ? { maxCreatesPerDay: a.maxCreatesPerDay } : {}),
        ...(a.tokens ? { tokens: a.tokens } : {}),
        ...(a.shareResults ? { shareResults: true } : {}),
      });
    }
    accountsFile.VQ_ACCOUNTS_FILE = join(dir, 'accounts.json');
    await writeFile(accountsFile.VQ_ACCOUNTS_FILE, JSON.stringify({ accounts }));
  }
  const config = testConfig(redis.prefix, {
    VQ_BASE_URL: sim.url,
    VQ_API_KEY_FILE: keyFile,
    VQ_OUT_DIR: join(dir, 'out'),
    ...(options.redisUrl !== undefined ? { REDIS_URL: options.redisUrl } : {}),
    ...accountsFile,
    ...options.config,
  });
  const services = await openQueueServices(config, options.resolve ? { resolve: options.resolve } : {});
  const logs = captureLogs();
  const workers: WorkerHandle[] = [];
  const openBatch = (batchId: string, options: BatchPlace = {}) =>
    services.batches
      .open({
        id: batchId,
        account: options.account ?? config.accounts[0]!.id,
        priority: options.priority ?? 'normal',
        weight: options.weight ?? 1,
        source: 'library',
        name: batchId,
        product: config.product,
      })
      .then(() => undefined);
  const harness: Harness = {
    sim,
    config,
    services,
    logs,
    redis,
    keyFile,
    ...(accountsFile.VQ_ACCOUNTS_FILE ? { accountsFile: accountsFile.VQ_ACCOUNTS_FILE } : {}),
    keyFileOf: (accountId) => join(dir, `key-${accountId}`),
    workers,
    line: services.accounts.line(config.accounts[0]!.id),
    queue: services.accounts.queue(config.accounts[0]!.id),
    async idle() {
      const counts = await services.accounts.counts('wait', 'prioritized', 'delayed', 'active');
      if (Object.values(counts).some((n) => n > 0)) return false;
      for (const account of config.accounts) if ((await services.scheduler.pendingTotal(account.id)) > 0) return false;
      return true;
    },
    startWorker(deps = {}) {
      const handle = startWorker(config, {
        logger: logs.logger,
        ...(deps.random ? { random: deps.random } : {}),
        ...(deps.clock ? { clock: deps.clock } : {}),
        ...(deps.activeReadEveryMs !== undefined ? { activeReadEveryMs: deps.activeReadEveryMs } : {}),
        ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
        ...(options.resolve ? { webhookResolve: options.resolve } : {}),
      });
      workers.push(handle);
      return handle;
    },
    open: openBatch,
    async enqueue(batchId, plates, options = {}) {
      const account = options.account ?? config.accounts[0]!.id;
      await openBatch(batchId, options);
      const info = await services.batchViews.get(batchId);
      const seen = new Map<string, number>();
      const rows: IngestRow[] = plates.map((plate, i) => {
        const first = seen.get(plate);
        if (first !== undefined)
          return { row: i + 1, input: plate, extra: [], kind: 'duplicate', plate, duplicateOf: first };
        seen.set(plate, i + 1);
        return { row: i + 1, input: plate, extra: [], kind: 'queued', plate };
      });
      for (let i = 0; i < rows.length; i += 500)
        await services.batches.addRows(info, rows.slice(i, i + 500), services.scheduler);
      await services.batches.seal(batchId);
      // As an ingest does: the first plates on the queue, and the worker processes told (a wake).
      await services.feeder.feedAndWake(account);
    },
    async waitForBatch(batchId, timeoutMs = 60_000) {
      // As the library's batch.done() waits: heard, read again every 2 s in case a test's own cut
      // connection lost the message.
      await services.batchViews.finished(batchId, { pollMs: 2_000, timeoutMs });
    },
    async close() {
      await Promise.all(workers.map((w) => w.close()));
      await services.close();
      await sim.close();
      await redis.cleanup();
      await rm(dir, { recursive: true, force: true });
    },
  };
  for (let i = 0; i < (options.workers ?? 1); i++) harness.startWorker();
  return harness;
}

/** The first account's flow as a worker process builds it (25 ms jitter), for tests that drive the pacing by hand. */
export function accountFlow(h: Harness, extra: Partial<FlowDeps> = {}): AccountFlow {
  return new AccountFlow({
    line: h.line,
    admission: new CreateAdmission(
      h.services.redis,
      h.line,
      h.services.inflight,
      h.services.budget,
      h.services.outcomes,
    ),
    inflight: h.services.inflight,
    answers: h.services.answers,
    budget: h.services.budget,
    scheduler: h.services.scheduler,
    jitterMs: 25,
    logger: h.logs.logger,
    ...extra,
  });
}

/**
 * A deployment that met the simulator's upstream before: its answers' shape learned, and 64 answer
 * times it stated, evenly from `fromMs` to `toMs` (the first poll then goes at their 90 % point).
 */
export async function metUpstream(h: Harness, fromMs: number, toMs: number): Promise<void> {
  await h.services.answers.learn('default', { id: '/body/queryId', status: '/body/status' }, Date.now());
  await h.services.learner.statedSpread(h.config.product, fromMs, toMs);
}

/** n distinct valid plates, deterministic: AAA0000, AAA0001, … (old format) or Mercosul. */
export function makePlates(n: number, offset = 0): string[] {
  const out: string[] = [];
  for (let i = offset; i < offset + n; i++) {
    const letters = String.fromCharCode(
      65 + (Math.floor(i / 10_000) % 26),
      65 + (Math.floor(i / 260_000) % 26),
      65 + (Math.floor(i / 6_760_000) % 26),
    );
    out.push(`${letters}${String(i % 10_000).padStart(4, '0')}`);
  }
  return out;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export type HarnessOptions = NonNullable<Parameters<typeof startHarness>[0]>;

export interface HarnessHolder {
  /** Starts the harness of the running test (or file, for `useHarness('all')`); it is closed for you. */
  start(options?: HarnessOptions): Promise<Harness>;
  /** The harness started last and not yet closed; throws when there is none. */
  readonly h: Harness;
}

/**
 * The set-up and teardown every integration file needs: call it at the top of a file, start the
 * harness inside a test (`const h = await harness.start({ … })`), and it is closed after the test
 * (`'each'`, the default) or after the file (`'all'`), even when the test fails. Call it before the
 * file's own `afterEach`/`afterAll`: vitest runs later hooks first, so those run while the harness
 * (Redis, the simulator) is still up.
 */
export function useHarness(scope: 'each' | 'all' = 'each'): HarnessHolder {
  let current: Harness | undefined;
  const close = async () => {
    const harness = current;
    current = undefined;
    await harness?.close();
  };
  if (scope === 'each') afterEach(close);
  else afterAll(close);
  return {
    async start(options = {}) {
      if (current !== undefined)
        throw new Error(
          'useHarness: a harness is already running; start one per test (or per file with useHarness("all"))',
        );
      current = await startHarness(options);
      return current;
    },
    get h() {
      if (current === undefined) throw new Error('useHarness: no harness started');
      return current;
    },
  };
}
