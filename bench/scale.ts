// Cost follows work (issue 21): what vqb costs Redis and the worker processes when nothing is
// queued, as the number of accounts grows, and per plate when there is work, beside "BullMQ by
// hand" (bench/bullmq-peer.ts) under the same simulated upstream. Everything runs against a
// redis-server of this step's own (a free port, saving nothing), so no other client's traffic is
// in its counters: commands are INFO's total_commands_processed (Lua's inner calls included),
// broken down by INFO commandstats; this step's own INFO and HMGET calls are subtracted.

import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createVqb, type Overrides } from '../src/index.js';
import { VqbKeys } from '../src/redis/keys.js';
import { luaScripts } from '../src/redis/scripts.js';
import { startThrowawayRedis } from '../src/redis/server.js';
import type { BullmqPeerOptions, BullmqPeerProgress } from './bullmq-peer.js';
import { BENCH_KEY, platesFrom, sleep } from './common.js';
import {
  forkIpc,
  processCpuSeconds,
  type SimChild,
  startSimChild,
  startSimChildWithConfig,
  startWorkerChild,
  type WorkerChild,
} from './procs.js';
import { monitorRedis } from './redis-monitor.js';
import type { StepContext } from './upstream.js';

export const BULLMQ_PEER_MODULE = fileURLToPath(new URL('./bullmq-peer.js', import.meta.url));

/** The idle targets, read at the largest account count of the run (200 in a full run). */
export const IDLE_TARGETS = { commandsPerS: 1_000, clients: 30, cpuPercent: 2 };
/** vqb ÷ the BullMQ peer, per plate. */
export const PER_PLATE_TARGETS = { commands: 1.5, cpu: 2 };

export interface ScaleWorkload {
  name: string;
  plates: number;
  /** The key's limit at the simulator, VQ_RATE_LIMIT for vqb, the peer's limiter max per second. */
  rate: number;
  completionMs: [number, number];
  /** The peer's delay before each poll. */
  peerPollMs: number;
  /**
   * A batch of this many plates each side runs first, in the same processes, unmeasured: the
   * figures are per plate of a process that has run (its code compiled, its connections and
   * account Worker up), not of its first minutes. The first batch's cost is reported apart.
   */
  warmPlates: number;
}

export interface ScaleSettings {
  accounts: number[];
  workers: number;
  warmupMs: number;
  windowMs: number;
  workloads: ScaleWorkload[];
}

export function scaleSettings(quick: boolean): ScaleSettings {
  return {
    accounts: quick ? [1, 10, 50] : [1, 10, 50, 200],
    workers: 2,
    warmupMs: 5_000,
    windowMs: 10_000,
    workloads: [
      // The peer polls once the slowest query is done: one poll a plate, its fewest requests.
      {
        name: 'a',
        plates: quick ? 100 : 300,
        rate: 30,
        completionMs: [1_000, 3_000],
        peerPollMs: 3_000,
        warmPlates: quick ? 60 : 150,
      },
      {
        name: 'b',
        plates: quick ? 600 : 3_000,
        rate: 400,
        completionMs: [100, 300],
        peerPollMs: 300,
        warmPlates: quick ? 400 : 1_500,
      },
    ],
  };
}

export interface IdleRow {
  accounts: number;
  workers: number;
  /** Seconds from the first worker's spawn to the last one's "worker started". */
  startS: number;
  seconds: number;
  commandsPerS: number;
  /** connected_clients at the window's start and end, minus those before the workers started. */
  clientsAtStart: number;
  clients: number;
  /** Each worker's user + system CPU over the window ÷ the window, %. */
  cpuPercent: number[];
  /** redis-server's own CPU over the window ÷ the window, %. */
  redisCpuPercent: number;
  /** The commands (commandstats) the workers sent most, per second. */
  topCommandsPerS: Record<string, number>;
  workerLog: Record<string, number>;
}

export interface PerPlateRun {
  plates: number;
  finished: number;
  failed: number;
  wallS: number;
  commands: number;
  commandsPerPlate: number;
  /** The part sent while the plates were enqueued (vqb's ingest; the peer's addBulk). */
  enqueueCommandsPerPlate: number;
  cpuMsPerPlate: number;
  /**
   * CPU of the enqueue, in the bench process (vqb: `enqueue` through the library, its ingest and
   * first feed; the peer: its addBulk, one job a plate). The two differ in where the jobs are made:
   * the peer's producer makes them, vqb's worker processes do (the feeder), so worker CPU alone
   * counts that work for vqb only; producer + worker counts it for both, as the commands do.
   */
  producerCpuMsPerPlate: number;
  /** Worker CPU per plate of the process's first batch (ScaleWorkload.warmPlates), compiling and connecting included. */
  coldCpuMsPerPlate?: number;
  redisCpuMsPerPlate: number;
  /** From the simulator's stats over the run. */
  requests: number;
  requestsPerPlate: number;
  creates: number;
  polls: number;
  rateLimited: number;
  maxInWindow: number;
  /** Calls per plate by command (commandstats), largest first. */
  callsPerPlate: Record<string, number>;
  workerLog?: Record<string, number>;
}

export interface WorkloadFigures extends ScaleWorkload {
  vqb?: PerPlateRun;
  peer?: PerPlateRun;
  /**
   * The same peer with its limiter spreading the limit evenly (`evenLimiter`): what the one-line fix
   * for its 429s costs. Shown beside the target's peer, not in its place: the target is read on
   * the peer as the issue wrote it.
   */
  peerEven?: PerPlateRun;
  /** vqb's Redis commands per plate by script (Lua's inner calls with their script), from a third run under MONITOR. */
  vqbSteps?: Record<string, number>;
  /** The same run's client calls (round trips a client sent: a script's EVALSHA is one) per plate by script. */
  vqbCalls?: Record<string, number>;
}

export interface ScaleFigures {
  redisVersion: string;
  /** The commit the run was built from, and the files under src/ and workers/ changed since (uncommitted). */
  code: { commit: string; uncommitted: string[] };
  idle: IdleRow[];
  workloads: WorkloadFigures[];
  errors: string[];
}

// ---------------------------------------------------------------------------------------------
// The dedicated Redis and its counters

export interface Snapshot {
  at: number;
  commands: number;
  clients: number;
  cpuS: number;
  calls: Map<string, number>;
  /** This step's own calls made before this snapshot's INFO, by command. */
  mine: Map<string, number>;
}

/** Reads the dedicated server's counters, and counts its own calls so they can be subtracted (bench/many-accounts.ts too). */
export class Probe {
  readonly #mine = new Map<string, number>();

  constructor(readonly redis: Redis) {}

  /** Counts `n` calls of `command` this step made itself on another path (a pipeline), to be subtracted. */
  count(command: string, n = 1): void {
    this.#mine.set(command, (this.#mine.get(command) ?? 0) + n);
  }

  /** One `INFO all`: stats, clients, cpu and commandstats read at the same instant. */
  async snapshot(): Promise<Snapshot> {
    const mine = new Map(this.#mine);
    this.count('info');
    const before = Date.now();
    const text = await this.redis.info('all');
    const at = (before + Date.now()) / 2;
    const field = (name: string) => Number(new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1]?.trim() ?? NaN);
    const calls = new Map<string, number>();
    for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1]!, Number(m[2]));
    return {
      at,
      commands: field('total_commands_processed'),
      clients: field('connected_clients'),
      cpuS: field('used_cpu_user') + field('used_cpu_sys'),
      calls,
      mine,
    };
  }

  async hmget(key: string, ...fields: string[]): Promise<(string | null)[]> {
    this.count('hmget');
    return this.redis.hmget(key, ...fields);
  }

  async flushall(): Promise<void> {
    this.count('flushall');
    await this.redis.flushall();
  }
}

/** Commands between two snapshots, this step's own left out. */
export function commandsBetween(a: Snapshot, b: Snapshot): number {
  let mine = 0;
  for (const [cmd, n] of b.mine) mine += n - (a.mine.get(cmd) ?? 0);
  return b.commands - a.commands - mine;
}

/** Calls by command between two snapshots, this step's own left out, largest first. */
export function callsBetween(a: Snapshot, b: Snapshot): [string, number][] {
  const out: [string, number][] = [];
  for (const [cmd, n] of b.calls) {
    const delta = n - (a.calls.get(cmd) ?? 0) - ((b.mine.get(cmd) ?? 0) - (a.mine.get(cmd) ?? 0));
    if (delta > 0) out.push([cmd, delta]);
  }
  return out.sort((x, y) => y[1] - x[1]);
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

function workerLog(workers: WorkerChild[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const w of workers) {
    for (const [msg, n] of w.messages) if (!msg.endsWith('worker started')) out[msg] = (out[msg] ?? 0) + n;
  }
  return out;
}

const idleKey = (i: number) => `bench-scale-${String(i).padStart(3, '0')}-key-0123456789abcdef`;
const idleAccount = (i: number) => `acct-${String(i).padStart(3, '0')}`;

// ---------------------------------------------------------------------------------------------
// 1. Idle: N accounts, two `vqb work` processes, nothing queued

async function measureIdle(
  ctx: StepContext,
  probe: Probe,
  redisUrl: string,
  sim: SimChild,
  accounts: number,
  s: ScaleSettings,
): Promise<IdleRow> {
  const dir = await mkdtemp(join(tmpdir(), 'vqb-bench-scale-'));
  const file = join(dir, 'accounts.json');
  await writeFile(
    file,
    JSON.stringify({
      accounts: Array.from({ length: accounts }, (_, i) => ({
        id: idleAccount(i),
        apiKey: idleKey(i),
        rateLimit: '10/s',
      })),
    }),
  );
  const env = {
    REDIS_URL: redisUrl,
    VQ_PREFIX: `{vqbbench-idle${accounts}-${randomBytes(4).toString('hex')}}`,
    VQ_BASE_URL: sim.url,
    VQ_ACCOUNTS_FILE: file,
    LOG_LEVEL: 'info',
  };
  const base = await probe.snapshot();
  const workers: WorkerChild[] = [];
  try {
    const t = Date.now();
    for (let i = 0; i < s.workers; i++) workers.push(await startWorkerChild(env));
    const startS = (Date.now() - t) / 1000;
    await sleep(s.warmupMs);
    const a = await probe.snapshot();
    const cpuA = workers.map((w) => w.cpuSeconds());
    await sleep(s.windowMs);
    const cpuB = workers.map((w) => w.cpuSeconds());
    const b = await probe.snapshot();
    const seconds = (b.at - a.at) / 1000;
    const row: IdleRow = {
      accounts,
      workers: s.workers,
      startS: round(startS, 2),
      seconds: round(seconds, 2),
      commandsPerS: round(commandsBetween(a, b) / seconds, 1),
      clientsAtStart: a.clients - base.clients,
      clients: b.clients - base.clients,
      cpuPercent: workers.map((_, i) => round(((cpuB[i]! - cpuA[i]!) / seconds) * 100, 2)),
      redisCpuPercent: round(((b.cpuS - a.cpuS) / seconds) * 100, 2),
      topCommandsPerS: Object.fromEntries(
        callsBetween(a, b)
          .slice(0, 8)
          .map(([cmd, n]) => [cmd, round(n / seconds, 1)]),
      ),
      workerLog: workerLog(workers),
    };
    ctx.log(
      `    ${accounts} accounts: ${row.commandsPerS} commands/s, ${row.clients} clients, CPU ${row.cpuPercent.join(' / ')} %`,
    );
    return row;
  } finally {
    await Promise.allSettled(workers.map((w) => w.stop()));
    await probe.flushall();
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Per plate: vqb, then the BullMQ peer, on the same simulator

interface Window {
  a: Snapshot;
  enqueued: Snapshot;
  b: Snapshot;
  cpuS: number;
  /** The bench process's CPU while it enqueued (see PerPlateRun.producerCpuMsPerPlate). */
  producerCpuS: number;
  wallS: number;
  finished: number;
  failed: number;
}

/** This process's CPU seconds since `from` (process.cpuUsage). */
function cpuSince(from: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1e6;
}

async function figures(sim: SimChild, plates: number, w: Window): Promise<PerPlateRun> {
  const stats = await sim.stats();
  const commands = commandsBetween(w.a, w.b);
  return {
    plates,
    finished: w.finished,
    failed: w.failed,
    wallS: round(w.wallS, 2),
    commands,
    commandsPerPlate: round(commands / plates, 2),
    enqueueCommandsPerPlate: round(commandsBetween(w.a, w.enqueued) / plates, 2),
    cpuMsPerPlate: round((w.cpuS * 1000) / plates, 3),
    producerCpuMsPerPlate: round((w.producerCpuS * 1000) / plates, 3),
    redisCpuMsPerPlate: round(((w.b.cpuS - w.a.cpuS) * 1000) / plates, 3),
    requests: stats.requests,
    requestsPerPlate: round(stats.requests / plates, 3),
    creates: stats.creates,
    polls: stats.gets,
    rateLimited: stats.rateLimited,
    maxInWindow: stats.maxInWindow,
    callsPerPlate: Object.fromEntries(callsBetween(w.a, w.b).map(([cmd, n]) => [cmd, round(n / plates, 3)])),
  };
}

/** Commands attributed to what sent them while a run lasts (see byScript). */
interface Watcher {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Names a script by the SHA1 its EVALSHA carries: vqb's (src/redis/lua) and BullMQ's own. */
function scriptNames(): Map<string, string> {
  const sha = (text: string) => createHash('sha1').update(text).digest('hex');
  const names = new Map<string, string>();
  for (const [name, script] of luaScripts()) names.set(sha(script.lua), name);
  // BullMQ's ESM build imports without file extensions, which Node does not resolve: its CommonJS build does.
  const bullmqScripts = createRequire(import.meta.url)('bullmq/dist/cjs/scripts/index.js') as Record<string, unknown>;
  for (const script of Object.values(bullmqScripts) as { name?: string; content?: string }[])
    if (script.content && script.name) names.set(sha(script.content), `bullmq ${script.name}`);
  return names;
}

/**
 * MONITOR on its own connection: every command by what sent it, a script's inner calls counted
 * with the script (Redis runs a script whole, so its calls follow its EVALSHA in the stream);
 * other commands by their name. MONITOR costs redis-server CPU, so this runs apart from the
 * measured runs.
 */
function byScript(redisUrl: string, counts: Map<string, number>, calls: Map<string, number>): Watcher {
  const names = scriptNames();
  let monitor: { stop(): void } | undefined;
  let current = '';
  return {
    async start() {
      monitor = await monitorRedis(redisUrl, ({ args, source }) => {
        const command = (args[0] ?? '').toLowerCase();
        if (source !== 'lua') {
          if (command === 'monitor') return;
          current =
            command === 'evalsha' || command === 'eval'
              ? (names.get(
                  command === 'eval'
                    ? createHash('sha1')
                        .update(args[1] ?? '')
                        .digest('hex')
                    : (args[1] ?? ''),
                ) ?? 'a script')
              : command;
          calls.set(current, (calls.get(current) ?? 0) + 1);
        }
        counts.set(current, (counts.get(current) ?? 0) + 1);
      });
    },
    async stop() {
      monitor?.stop();
    },
  };
}

function timeoutFor(w: ScaleWorkload): number {
  return Math.max(120_000, 10 * ((2 * w.plates) / w.rate + w.completionMs[1] / 1000) * 1000);
}

/** Waits for a vqb batch's `finishedAt`; returns it with its done and failed counts. */
async function untilFinished(probe: Probe, key: string, deadline: number): Promise<(string | null)[]> {
  const from = Date.now();
  for (;;) {
    const fields = await probe.hmget(key, 'finishedAt', 'done', 'failed');
    if (fields[0]) return fields;
    if (Date.now() > deadline) throw new Error(`vqb: batch not finished within ${deadline - from} ms`);
    await sleep(200);
  }
}

async function runVqb(
  ctx: StepContext,
  probe: Probe,
  redisUrl: string,
  sim: SimChild,
  w: ScaleWorkload,
  watch?: Watcher,
): Promise<PerPlateRun> {
  const prefix = `{vqbbench-scale-${w.name}-${randomBytes(4).toString('hex')}}`;
  const settings = {
    REDIS_URL: redisUrl,
    VQ_PREFIX: prefix,
    VQ_BASE_URL: sim.url,
    VQ_API_KEY: BENCH_KEY,
    VQ_RATE_LIMIT: `${w.rate}/s`,
  };
  const worker = await startWorkerChild({ ...settings, LOG_LEVEL: 'info' });
  try {
    const vqb = await createVqb({
      env: {},
      settings: { ...settings, LOG_LEVEL: 'silent' } as Overrides,
      workers: false,
    });
    const keys = new VqbKeys({ prefix, queueName: vqb.config.queueName });
    const account = vqb.config.accounts[0]!.id;
    const key = keys.batch({ id: `scale-${w.name}`, account });
    // The first batch, unmeasured but for its CPU (see ScaleWorkload.warmPlates).
    const warmCpu0 = worker.cpuSeconds();
    await vqb.enqueue(platesFrom(ctx.allocatePlates(w.warmPlates), w.warmPlates), {
      batchId: `scale-${w.name}-warm`,
      name: `scale-${w.name}-warm`,
    });
    await untilFinished(probe, keys.batch({ id: `scale-${w.name}-warm`, account }), Date.now() + timeoutFor(w));
    const coldCpuS = worker.cpuSeconds() - warmCpu0;
    const plates = platesFrom(ctx.allocatePlates(w.plates), w.plates);
    await sleep(1_000);
    await sim.reset();
    await watch?.start();
    const a = await probe.snapshot();
    const cpu0 = worker.cpuSeconds();
    const t0 = Date.now();
    const producer0 = process.cpuUsage();
    let producerCpuS: number;
    try {
      await vqb.enqueue(plates, { batchId: `scale-${w.name}`, name: `scale-${w.name}` });
    } finally {
      producerCpuS = cpuSince(producer0);
      await vqb.close();
    }
    const enqueued = await probe.snapshot();
    const fields = await untilFinished(probe, key, t0 + timeoutFor(w));
    const b = await probe.snapshot();
    await watch?.stop();
    const cpuS = worker.cpuSeconds() - cpu0;
    const run = await figures(sim, w.plates, {
      a,
      enqueued,
      b,
      cpuS,
      producerCpuS,
      wallS: (Number(fields[0]) - t0) / 1000,
      finished: Number(fields[1] ?? 0),
      failed: Number(fields[2] ?? 0),
    });
    return { ...run, coldCpuMsPerPlate: round((coldCpuS * 1000) / w.warmPlates, 3), workerLog: workerLog([worker]) };
  } finally {
    await worker.stop();
    await probe.flushall();
  }
}

/**
 * BullMQ's limiter with the limit spread evenly: the fewest jobs per window of at least 5 ms (a
 * whole number of ms) at no more than `rate` a second: 1 per 34 ms at 30/s, 2 per 5 ms at 400/s.
 * The peer as written starts `rate` jobs at once each second, a burst whose work shares the
 * process's wake-ups (and whose overlap with the simulator's sliding window draws its 429s).
 */
export function evenLimiter(rate: number): { max: number; durationMs: number } {
  const max = Math.max(1, Math.ceil((5 * rate) / 1_000));
  return { max, durationMs: Math.ceil((max * 1_000) / rate) };
}

async function runPeer(
  ctx: StepContext,
  probe: Probe,
  redisUrl: string,
  sim: SimChild,
  w: ScaleWorkload,
  even = false,
): Promise<PerPlateRun> {
  const options: BullmqPeerOptions = {
    redisUrl,
    prefix: 'bull',
    queueName: `plates-${w.name}${even ? '-even' : ''}`,
    baseUrl: sim.url,
    apiKey: BENCH_KEY,
    product: 'agregados',
    limiter: even ? evenLimiter(w.rate) : { max: w.rate, durationMs: 1_000 },
    concurrency: w.rate,
    pollMs: w.peerPollMs,
    plates: w.warmPlates + w.plates,
  };
  const peer = forkIpc<BullmqPeerProgress | { type: 'ready' }>(BULLMQ_PEER_MODULE);
  const url = new URL(redisUrl);
  const queue = new Queue(options.queueName, {
    connection: { host: url.hostname, port: Number(url.port) },
    prefix: options.prefix,
  });
  try {
    await peer.ask({ type: 'init', options }, 'ready');
    await queue.waitUntilReady();
    const pid = peer.child.pid!;
    const done = peer.next<BullmqPeerProgress>('done');
    done.catch(() => {});
    // The first batch, unmeasured but for its CPU (see ScaleWorkload.warmPlates).
    const warmCpu0 = processCpuSeconds(pid);
    peer.child.send({ type: 'start' });
    await queue.addBulk(
      platesFrom(ctx.allocatePlates(w.warmPlates), w.warmPlates).map((plate) => ({ name: 'lookup', data: { plate } })),
    );
    const warmDeadline = Date.now() + timeoutFor(w);
    let warm: BullmqPeerProgress;
    for (;;) {
      const p = await peer.ask<BullmqPeerProgress>({ type: 'report' }, 'progress');
      if (p.completed + p.failed >= w.warmPlates) {
        warm = p;
        break;
      }
      if (Date.now() > warmDeadline) throw new Error('peer: first batch not finished in time');
      await sleep(200);
    }
    const coldCpuS = processCpuSeconds(pid) - warmCpu0;
    const plates = platesFrom(ctx.allocatePlates(w.plates), w.plates);
    await sleep(1_000);
    await sim.reset();
    const a = await probe.snapshot();
    const cpu0 = processCpuSeconds(pid);
    const t0 = Date.now();
    const producer0 = process.cpuUsage();
    await queue.addBulk(plates.map((plate) => ({ name: 'lookup', data: { plate } })));
    const producerCpuS = cpuSince(producer0);
    const enqueued = await probe.snapshot();
    await queue.close();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`peer not finished within ${timeoutFor(w)} ms`)), timeoutFor(w));
    });
    const p = await Promise.race([done, timeout]).finally(() => clearTimeout(timer));
    const b = await probe.snapshot();
    const cpuS = processCpuSeconds(pid) - cpu0;
    const run = await figures(sim, w.plates, {
      a,
      enqueued,
      b,
      cpuS,
      producerCpuS,
      wallS: ((p.lastFinishedAt ?? Date.now()) - t0) / 1000,
      finished: p.completed - warm.completed,
      failed: p.failed - warm.failed,
    });
    return { ...run, coldCpuMsPerPlate: round((coldCpuS * 1000) / w.warmPlates, 3) };
  } finally {
    await queue.close().catch(() => {});
    await peer.stop();
    await probe.flushall();
  }
}

/** What code the figures are of: HEAD, and src/ or workers/ files changed and not committed. */
function codeVersion(): ScaleFigures['code'] {
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd: fileURLToPath(new URL('../..', import.meta.url)), encoding: 'utf8' }).trim();
  try {
    const changed = git('status', '--porcelain', '--', 'src', 'workers');
    return { commit: git('rev-parse', '--short', 'HEAD'), uncommitted: changed ? changed.split('\n') : [] };
  } catch {
    return { commit: 'unknown', uncommitted: [] };
  }
}

// ---------------------------------------------------------------------------------------------

export async function measureScale(ctx: StepContext, s: ScaleSettings): Promise<ScaleFigures> {
  const server = await startThrowawayRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: 2, connectionName: 'vqb-bench-scale' });
  const probe = new Probe(redis);
  const out: ScaleFigures = { redisVersion: '', code: codeVersion(), idle: [], workloads: [], errors: [] };
  ctx.log(`    dedicated redis-server at ${server.url}`);
  try {
    out.redisVersion = /^redis_version:(.*)$/m.exec(await redis.info('server'))?.[1]?.trim() ?? 'unknown';
    const most = Math.max(...s.accounts);
    const idleSim = await startSimChildWithConfig({
      keys: Array.from({ length: most }, (_, i) => ({ key: idleKey(i), label: idleAccount(i), rateLimit: '10/s' })),
      window: 'sliding',
      dailyQuota: 1_000_000_000,
    });
    try {
      for (const n of s.accounts) {
        try {
          out.idle.push(await measureIdle(ctx, probe, server.url, idleSim, n, s));
        } catch (err) {
          out.errors.push(`idle, ${n} accounts: ${(err as Error).message.split('\n')[0]}`);
          ctx.log(`    idle, ${n} accounts FAILED: ${(err as Error).message}`);
        }
      }
    } finally {
      await idleSim.stop();
    }
    for (const w of s.workloads) {
      const sim = await startSimChild([
        '--rate-limit',
        `${w.rate}/s`,
        '--window',
        'sliding',
        '--completion',
        `${w.completionMs[0]}-${w.completionMs[1]}`,
        '--key',
        `${BENCH_KEY}:all`,
        '--daily-quota',
        '1000000000',
      ]);
      const figures: WorkloadFigures = { ...w };
      try {
        for (const who of ['vqb', 'peer', 'peerEven'] as const) {
          try {
            const run =
              who === 'vqb'
                ? await runVqb(ctx, probe, server.url, sim, w)
                : await runPeer(ctx, probe, server.url, sim, w, who === 'peerEven');
            figures[who] = run;
            ctx.log(
              `    ${w.name} (${w.plates} plates at ${w.rate}/s), ${who}: ${run.commandsPerPlate} commands/plate, ` +
                `${run.cpuMsPerPlate} CPU ms/plate (first batch ${run.coldCpuMsPerPlate}), ${run.rateLimited} 429s, ${run.wallS} s`,
            );
          } catch (err) {
            out.errors.push(`workload ${w.name}, ${who}: ${(err as Error).message.split('\n')[0]}`);
            ctx.log(`    workload ${w.name}, ${who} FAILED: ${(err as Error).message}`);
          }
        }
        try {
          const counts = new Map<string, number>();
          const calls = new Map<string, number>();
          await runVqb(ctx, probe, server.url, sim, w, byScript(server.url, counts, calls));
          const perPlate = (m: Map<string, number>) =>
            Object.fromEntries([...m].sort((x, y) => y[1] - x[1]).map(([name, n]) => [name, round(n / w.plates, 2)]));
          figures.vqbSteps = perPlate(counts);
          figures.vqbCalls = perPlate(calls);
        } catch (err) {
          out.errors.push(`workload ${w.name}, vqb by script: ${(err as Error).message.split('\n')[0]}`);
        }
      } finally {
        await sim.stop();
      }
      out.workloads.push(figures);
    }
  } finally {
    redis.disconnect();
    await server.close();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Tables

const int = (x: number | undefined) =>
  x === undefined || !Number.isFinite(x) ? '—' : Math.round(x).toLocaleString('en');
const fixed = (digits: number) => (x: number | undefined) =>
  x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits);
const mark = (ok: boolean | undefined) => (ok === undefined ? '' : ok ? ' ✓' : ' ✗');

export function text(head: string[], cells: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

export function markdown(head: string[], cells: string[][]): string {
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`,
    ...cells.map((c) => `| ${c.join(' | ')} |`),
  ].join('\n');
}

interface Table {
  title: string;
  head: string[];
  cells: string[][];
}

function idleTable(f: ScaleFigures): Table | undefined {
  if (f.idle.length === 0) return undefined;
  const most = Math.max(...f.idle.map((r) => r.accounts));
  const t = IDLE_TARGETS;
  const cells = f.idle.map((r) => {
    const judged = r.accounts === most;
    const cpuWorst = Math.max(...r.cpuPercent);
    const top = Object.entries(r.topCommandsPerS)
      .slice(0, 4)
      .map(([cmd, n]) => `${cmd} ${n}`)
      .join(', ');
    return [
      String(r.accounts),
      `${fixed(1)(r.commandsPerS)}${judged ? mark(r.commandsPerS <= t.commandsPerS) : ''}`,
      `${int(r.clients)}${judged ? mark(r.clients <= t.clients) : ''}`,
      `${r.cpuPercent.map((x) => x.toFixed(2)).join(' / ')}${judged ? mark(cpuWorst <= t.cpuPercent) : ''}`,
      fixed(2)(r.redisCpuPercent),
      fixed(1)(r.startS),
      top,
    ];
  });
  cells.push([
    `target (at ${most})`,
    `≤ ${t.commandsPerS.toLocaleString('en')}`,
    `≤ ${t.clients}`,
    `≤ ${t.cpuPercent} each`,
    '',
    '',
    '',
  ]);
  const w = f.idle[0]!;
  return {
    title: `Idle: ${w.workers} \`vqb work\` processes, nothing queued, ${w.seconds.toFixed(0)} s window after warm-up`,
    head: [
      'accounts',
      'Redis commands/s',
      'Redis clients',
      'worker CPU %',
      'redis-server CPU %',
      'start s',
      'top commands/s',
    ],
    cells,
  };
}

function workloadTable(w: WorkloadFigures): Table {
  const { vqb, peer, peerEven } = w;
  const ratio = (x?: number, y?: number) => (x === undefined || !y ? undefined : x / y);
  const total = (r?: PerPlateRun) => (r === undefined ? undefined : r.cpuMsPerPlate + r.producerCpuMsPerPlate);
  const cmdRatio = ratio(vqb?.commandsPerPlate, peer?.commandsPerPlate);
  const cpuRatio = ratio(total(vqb), total(peer));
  const evenRatio = ratio(total(vqb), total(peerEven));
  const workerRatio = ratio(vqb?.cpuMsPerPlate, peer?.cpuMsPerPlate);
  const x = (r: number | undefined) => (r === undefined ? '' : ` (${r.toFixed(2)} ×)`);
  // Each row: its name, the figure of a run, how it is printed, the target column.
  const rows: [string, (r: PerPlateRun) => number, (v: number | undefined) => string, string][] = [
    [
      'Redis commands per plate',
      (r) => r.commandsPerPlate,
      fixed(1),
      `≤ ${PER_PLATE_TARGETS.commands} × peer${x(cmdRatio)}${cmdRatio === undefined ? '' : mark(cmdRatio <= PER_PLATE_TARGETS.commands)}`,
    ],
    ['… of which while enqueuing (ingest / addBulk)', (r) => r.enqueueCommandsPerPlate, fixed(1), ''],
    [
      'CPU ms per plate: producer + worker',
      (r) => r.cpuMsPerPlate + r.producerCpuMsPerPlate,
      fixed(2),
      `≤ ${PER_PLATE_TARGETS.cpu} × peer${x(cpuRatio)}${cpuRatio === undefined ? '' : mark(cpuRatio <= PER_PLATE_TARGETS.cpu)}${evenRatio === undefined ? '' : `; ${evenRatio.toFixed(2)} × the even peer`}`,
    ],
    [
      '… worker processes',
      (r) => r.cpuMsPerPlate,
      fixed(2),
      workerRatio === undefined ? '' : `${workerRatio.toFixed(2)} ×`,
    ],
    ['… the enqueue (in the bench process)', (r) => r.producerCpuMsPerPlate, fixed(2), ''],
    ['redis-server CPU ms per plate', (r) => r.redisCpuMsPerPlate, fixed(2), ''],
    ['429s received', (r) => r.rateLimited, int, ''],
    ['requests per plate (every request the simulator got)', (r) => r.requestsPerPlate, fixed(2), ''],
    ['densest 1 s at the simulator (requests)', (r) => r.maxInWindow, int, ''],
    ['plates finished (done + failed)', (r) => r.finished + r.failed, int, ''],
    ['wall s (enqueue → last result stored)', (r) => r.wallS, fixed(1), ''],
  ];
  const [lo, hi] = w.completionMs;
  const even = evenLimiter(w.rate);
  return {
    title: `${w.plates.toLocaleString('en')} plates, key limit ${w.rate}/s, queries complete in ${lo / 1000}–${hi / 1000} s (peer polls after ${w.peerPollMs / 1000} s; the even peer's limiter: ${even.max} per ${even.durationMs} ms)`,
    head: ['figure', 'vqb', 'BullMQ by hand', 'BullMQ by hand, paced evenly', 'target'],
    cells: rows.map(([name, of, format, target]) => [
      name,
      format(vqb && of(vqb)),
      format(peer && of(peer)),
      format(peerEven && of(peerEven)),
      target,
    ]),
  };
}

function breakdownTable(w: WorkloadFigures): Table | undefined {
  if (!w.vqb) return undefined;
  const vqb = w.vqb.callsPerPlate;
  const peer = w.peer?.callsPerPlate ?? {};
  const names = Object.keys(vqb).slice(0, 10);
  for (const name of Object.keys(peer).slice(0, 5)) if (!names.includes(name)) names.push(name);
  return {
    title: `Redis calls per plate by command (INFO commandstats; Lua's inner calls counted under their own names), ${w.plates.toLocaleString('en')} plates at ${w.rate}/s`,
    head: ['command', 'vqb', 'BullMQ by hand'],
    cells: names.map((n) => [n, fixed(2)(vqb[n] ?? 0), fixed(2)(peer[n] ?? 0)]),
  };
}

/** What each script or command is for, along a plate's path. */
const STEP_OF: Record<string, string> = {
  'batch-open': 'ingest',
  'sched-enlist': 'ingest',
  'sched-feed': 'feed (staged → queue)',
  'bullmq addPrioritizedJob': 'feed (staged → queue)',
  'bullmq moveToActive': 'fetch',
  bzpopmin: 'fetch',
  'create-admit': 'admit a create (pace, in-flight, caps)',
  'pace-acquire': 'admit a poll (pace)',
  pttl: 'hold check before a poll',
  'job-fence': 'fence (creating mark + hold check, query id, poll progress)',
  'cost-count': 'cost counters',
  'bullmq moveToDelayed': 'poll later (delayed set)',
  'learn-observe': 'poll schedule learning',
  'plate-settle': 'record the outcome, give back the in-flight slot, count the answer',
  'batch-record': 'record the outcome',
  'inflight-release': 'give back the in-flight slot',
  hexists: 'outcome already stored? (a job fetched past its create)',
  zrange: 'feed (the active accounts)',
  zrem: 'feed (unstage)',
  'bullmq moveToFinished': 'finish (and fetch the next)',
};

function stepsTable(w: WorkloadFigures): Table | undefined {
  if (!w.vqbSteps) return undefined;
  const entries = Object.entries(w.vqbSteps).filter(([, n]) => n >= 0.1);
  const calls = w.vqbCalls ?? {};
  const total = Object.values(calls).reduce((a, b) => a + b, 0);
  return {
    title: `vqb's Redis commands per plate by script (MONITOR, a separate run; inner calls with their script; calls = round trips a client sent, ${fixed(1)(total)} a plate in all), ${w.plates.toLocaleString('en')} plates at ${w.rate}/s`,
    head: ['script or command', 'step', 'commands per plate', 'calls per plate'],
    cells: entries.map(([name, n]) => [name, STEP_OF[name] ?? '', fixed(1)(n), fixed(2)(calls[name] ?? 0)]),
  };
}

function tables(f: ScaleFigures): Table[] {
  const out: Table[] = [];
  const idle = idleTable(f);
  if (idle) out.push(idle);
  for (const w of f.workloads) {
    out.push(workloadTable(w));
    const breakdown = breakdownTable(w);
    if (breakdown) out.push(breakdown);
    const steps = stepsTable(w);
    if (steps) out.push(steps);
  }
  return out;
}

export const SCALE_METHOD = `All on a redis-server the step starts on a free port (nothing else talks to it). Commands =
INFO \`total_commands_processed\` delta (Lua's inner calls included), the step's own INFO and HMGET
calls subtracted; clients = \`connected_clients\` minus those before the workers started; CPU =
user + system from \`/proc/<pid>/stat\`. **Idle:** an accounts file of N accounts (each its own
simulator key, 10/s configured), two \`vqb work\` processes, nothing queued; a window of 10 s opens
5 s after both said "worker started". **Per plate:** one \`vqb work\` process at VQ_RATE_LIMIT = the
key's limit, plates enqueued through the library (\`createVqb().enqueue\`, then closed); beside it
"BullMQ by hand" (\`bench/bullmq-peer.ts\`, a child process): one queue, addBulk of one job per plate
from the bench, one Worker with \`limiter: {max: limit, duration: 1000}\` and concurrency = limit,
create, \`updateData\` with the queryId, \`moveToDelayed\` + DelayedError between polls, the body
returned as the job's result, 429 → \`worker.rateLimit(Retry-After)\`. Both from the enqueue to the
last result stored; same simulator (sliding window, reset before each run). Commands per plate and
the breakdown include the enqueue, and so does the CPU the target is read on: the worker processes'
(\`/proc\`) plus the bench process's own while it enqueued (\`process.cpuUsage\`), since the peer's
producer makes its jobs (addBulk) where vqb's worker processes make theirs (the feeder); both parts
are shown. **The even peer:** the same peer, its limiter spreading the limit (\`evenLimiter\`: 1 per
34 ms at 30/s, 2 per 5 ms at 400/s) instead of starting a second's jobs at once; shown for what the
peer's CPU is made of (work done in bursts shares the process's wake-ups), the target is read on the
peer as written.
**By script:** a third run of vqb, the same workload, under MONITOR (which costs redis-server CPU, so
it is kept apart): each command is named by the script whose EVALSHA it follows (Lua's inner calls
included), vqb's by its file in \`src/redis/lua/\`, BullMQ's by its own.`;

/** The step's tables as text (printed) and as a Markdown section (RESULTS.md). */
export function scaleTables(f: ScaleFigures): { text: string; markdown: string } {
  const list = tables(f);
  const errors = f.errors.length > 0 ? `failed: ${f.errors.join('; ')}` : '';
  return {
    text: [...list.map((t) => `${t.title}\n${text(t.head, t.cells)}`), errors].filter(Boolean).join('\n\n'),
    markdown: [
      '## Cost follows work (issue 21)',
      '',
      `Redis ${f.redisVersion}, dedicated to the step. ${SCALE_METHOD}`,
      '',
      `Code: ${f.code.commit}${f.code.uncommitted.length > 0 ? `, with uncommitted changes to ${f.code.uncommitted.length} files under src/ and workers/ (results.json lists them)` : ''}.`,
      '',
      ...list.flatMap((t) => [`**${t.title}**`, '', markdown(t.head, t.cells), '']),
      ...(errors ? [errors, ''] : []),
    ].join('\n'),
  };
}
