// The steps that talk to the upstream simulator: one run of vqb (workers in a `vqb work` child,
// plates enqueued through the library API here) or of the naive peer (a child of its own), either
// for a fixed measuring window under a standing backlog, or for one whole batch.
import { fileURLToPath } from 'node:url';
import type { RedisClient } from '../src/redis/connection.js';
import type { SimulatorStats } from '../src/simulator/index.js';
import { BENCH_KEY, platesFrom, sleep } from './common.js';
import { startFleet } from './fleet.js';
import type { PeerOptions, PeerProgress } from './peer.js';
import { forkIpc, type SimChild } from './procs.js';

export const PEER_MODULE = fileURLToPath(new URL('./peer.js', import.meta.url));

export interface StepContext {
  sim: SimChild;
  redis: RedisClient;
  /** A range of plates no earlier step used (the simulator counts creates per plate). */
  allocatePlates(count: number): number;
  log(line: string): void;
}

/** What a client is running: vqb at a configured rate, or the peer with an interval cap. */
export interface ClientSpec {
  who: 'vqb' | 'peer';
  label: string;
  /** Requests per second the client is configured for (VQ_RATE_LIMIT / intervalCap). */
  rate: number;
  plates: number;
  peer?: { concurrency: number; pollMs: number };
}

interface Progress {
  finished: number;
  /** Plates not started yet: a backlog above 0 at the end means the window saw steady work. */
  backlog: number;
}

export interface WindowResult {
  seconds: number;
  /** Counted (not 429) upstream requests per second in the window. */
  requestsPerS: number;
  finishedPerS: number;
  createsPerS: number;
  pollsPerS: number;
  /** 429s over the whole run (from the first request) and within the window. */
  rateLimited: number;
  rateLimitedInWindow: number;
  /** Densest 1 s of counted requests the simulator saw over the whole run. */
  maxInWindow: number;
  backlogAtEnd: number;
  /** The workers' log lines by message over the whole run (vqb only). */
  workerLog?: Record<string, number>;
}

export interface BatchResult {
  plates: number;
  finished: number;
  wallS: number;
  creates: number;
  polls: number;
  rateLimited: number;
  maxInWindow: number;
  /** Worker process CPU seconds (user + system) from enqueue to the batch's end; vqb only. */
  workerCpuS?: number;
  /** The workers' log lines by message (vqb only): how often the line held, warned, failed. */
  workerLog?: Record<string, number>;
}

interface Runner {
  progress(): Promise<Progress>;
  /** Resolves when every plate finished: wall time in ms and plates finished. */
  done(timeoutMs: number): Promise<{ wallMs: number; finished: number }>;
  cpuSeconds?: () => number;
  workerLog?: () => Record<string, number>;
  stop(): Promise<void>;
}

async function startRunner(ctx: StepContext, spec: ClientSpec): Promise<Runner> {
  const from = ctx.allocatePlates(spec.plates);
  if (spec.who === 'peer') return startPeer(ctx, spec, from);

  const fleet = await startFleet(ctx, {
    label: spec.label,
    workers: 1,
    upstreamUrl: ctx.sim.url,
    accounts: [{ id: 'default', key: BENCH_KEY, rateLimit: `${spec.rate}/s` }],
  });
  const cpu0 = fleet.cpuSeconds();
  const t0 = Date.now();
  const batch = await fleet.vqb
    .enqueue(platesFrom(from, spec.plates), { name: spec.label, batchId: spec.label })
    .catch(async (err: unknown) => {
      await fleet.stop();
      throw err;
    });
  return {
    async progress() {
      const c = (await batch.progress()).counts;
      return { finished: c.done + c.failed, backlog: c.queued };
    },
    async done(timeoutMs) {
      const info = await batch.done({ pollMs: 100, timeoutMs });
      return {
        wallMs: (info.finishedAt ? Date.parse(info.finishedAt) : Date.now()) - t0,
        finished: info.counts.done + info.counts.failed,
      };
    },
    cpuSeconds: () => fleet.cpuSeconds() - cpu0,
    workerLog: () => fleet.workerLog(),
    stop: () => fleet.stop(),
  };
}

async function startPeer(ctx: StepContext, spec: ClientSpec, from: number): Promise<Runner> {
  const peer = forkIpc<PeerProgress>(PEER_MODULE);
  const options: PeerOptions = {
    baseUrl: ctx.sim.url,
    apiKey: BENCH_KEY,
    product: 'agregados',
    platesFrom: from,
    plateCount: spec.plates,
    intervalCap: spec.rate,
    intervalMs: 1_000,
    concurrency: spec.peer?.concurrency ?? spec.rate * 3,
    pollMs: spec.peer?.pollMs ?? 2_000,
  };
  const finished = peer.next<PeerProgress>('done');
  finished.catch(() => {}); // observed in done(); a peer stopped mid-run never sends it
  peer.child.send({ type: 'start', options });
  return {
    async progress() {
      const p = await peer.ask<PeerProgress>({ type: 'report' }, 'progress');
      const finishedPlates = p.finished + p.failed;
      // Plates not yet taken by one of the loops.
      return { finished: finishedPlates, backlog: Math.max(0, spec.plates - finishedPlates - options.concurrency) };
    },
    async done(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`peer not finished within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        const p = await Promise.race([finished, timeout]);
        return { wallMs: (p.lastFinishedAt ?? Date.now()) - p.startedAt, finished: p.finished + p.failed };
      } finally {
        clearTimeout(timer);
      }
    },
    stop: () => peer.stop(),
  };
}

async function snapshot(
  ctx: StepContext,
  runner: Runner,
): Promise<{ at: number; stats: SimulatorStats; progress: Progress }> {
  const before = Date.now();
  const [stats, progress] = await Promise.all([ctx.sim.stats(), runner.progress()]);
  return { at: (before + Date.now()) / 2, stats, progress };
}

/**
 * Runs `spec` against a standing backlog and measures a window of `windowMs` that opens
 * `warmupMs` after the simulator saw the run's first request.
 */
export async function measureWindow(
  ctx: StepContext,
  spec: ClientSpec,
  warmupMs: number,
  windowMs: number,
): Promise<WindowResult> {
  await ctx.sim.reset();
  const runner = await startRunner(ctx, spec);
  try {
    let first: number | null = null;
    const deadline = Date.now() + 30_000;
    while (first === null) {
      if (Date.now() > deadline) throw new Error(`${spec.label}: no request reached the simulator within 30 s`);
      await sleep(25);
      first = (await ctx.sim.stats()).firstRequestAt;
    }
    await sleep(first + warmupMs - Date.now());
    const a = await snapshot(ctx, runner);
    await sleep(windowMs);
    const b = await snapshot(ctx, runner);
    const seconds = (b.at - a.at) / 1000;
    const per = (x: number) => x / seconds;
    return {
      seconds,
      requestsPerS: per(b.stats.counted - a.stats.counted),
      finishedPerS: per(b.progress.finished - a.progress.finished),
      createsPerS: per(b.stats.creates - a.stats.creates),
      pollsPerS: per(b.stats.gets - a.stats.gets),
      rateLimited: b.stats.rateLimited,
      rateLimitedInWindow: b.stats.rateLimited - a.stats.rateLimited,
      maxInWindow: b.stats.maxInWindow,
      backlogAtEnd: b.progress.backlog,
      ...(runner.workerLog ? { workerLog: runner.workerLog() } : {}),
    };
  } finally {
    await runner.stop();
  }
}

/** Runs one whole batch of `spec.plates` from enqueue (or start) to the last outcome. */
export async function measureBatch(ctx: StepContext, spec: ClientSpec, timeoutMs: number): Promise<BatchResult> {
  await ctx.sim.reset();
  const runner = await startRunner(ctx, spec);
  try {
    const { wallMs, finished } = await runner.done(timeoutMs);
    const cpu = runner.cpuSeconds?.();
    const stats = await ctx.sim.stats();
    return {
      plates: spec.plates,
      finished,
      wallS: wallMs / 1000,
      creates: stats.creates,
      polls: stats.gets,
      rateLimited: stats.rateLimited,
      maxInWindow: stats.maxInWindow,
      ...(cpu === undefined ? {} : { workerCpuS: cpu }),
      ...(runner.workerLog ? { workerLog: runner.workerLog() } : {}),
    };
  } finally {
    await runner.stop();
  }
}
