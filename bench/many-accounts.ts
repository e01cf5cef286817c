// Many accounts at once (issue 21): 1,000 accounts, each its own simulator key with its own
// per-minute limit, announced in the simulator's rate-limit headers and learned by vqb (`auto`,
// the product's real mode: nobody types the numbers); four `vqb work` processes on one Redis of
// the step's own; a 6-plate batch on every account, then one `interactive` plate submitted last.
// Everything paid is counted at the simulator (its stats, with every counted request's arrival
// per key): whether all batches finish, the 429s, and each account's use of its key while it had
// creates waiting; Redis commands, clients and CPU from the dedicated server, worker CPU from /proc.
// The scenario runs on any `ManyRedis`: one server here, the masters of a cluster in bench/cluster.ts.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { perSecond } from '../src/accounts/account.js';
import { createVqb, type Overrides, type Vqb } from '../src/index.js';
import { type BatchRef, barePrefix, VqbKeys } from '../src/redis/keys.js';
import { startThrowawayRedis } from '../src/redis/server.js';
import { parseRateLimit } from '../src/setting-values.js';
import { platesFrom, sleep } from './common.js';
import {
  processCpuSeconds,
  type SimChild,
  startSimChildWithConfig,
  startWorkerChild,
  type WorkerChild,
} from './procs.js';
import { callsBetween, commandsBetween, markdown, Probe, type Snapshot, text } from './scale.js';
import { upstreamTimes } from './scheduling.js';
import type { StepContext } from './upstream.js';

/** Each account while it has creates waiting: its key's counted requests ÷ what its limit allows. */
export const MANY_TARGETS = { ofLimit: 0.9, rateLimited: 0, interactiveAfterBulkS: 2 };

export interface ManyAccountsSettings {
  accounts: number;
  /** VQ_* settings the bench's own environment passes to the workers (an experiment), recorded with the figures. */
  workerEnv?: Record<string, string>;
  workers: number;
  platesPerAccount: number;
  /**
   * Every key's limit at the simulator. 12/min: 1,000 keys allow 200 requests/s in all, about 100
   * plates/s, what one Redis and four worker processes can serve on a shared 2-core machine
   * beside the simulator (the scale step measures 1.3-1.5 ms of Redis CPU and 3-6 ms of worker
   * CPU a plate); a per-second limit of 1/s would ask for 1,000 requests/s.
   */
  keyLimit: string;
  completionMs: [number, number];
  /** Batches enqueued at once by the bench's producer. */
  enqueueConcurrency: number;
  timeoutMs: number;
}

export function manyAccountsSettings(quick: boolean): ManyAccountsSettings {
  return {
    accounts: quick ? 100 : 1_000,
    workers: 4,
    platesPerAccount: 6,
    keyLimit: '12/min',
    completionMs: [2_000, 6_000],
    enqueueConcurrency: 16,
    timeoutMs: 600_000,
  };
}

export interface AccountUse {
  account: string;
  /** Its batch's enqueue resolved (creates waiting from then) → its key's last counted create, s. */
  waitingS: number;
  /** The key's counted requests (creates and polls: both take the key's limit) in that span. */
  requests: number;
  creates: number;
  /** requests ÷ (span × limit + 1): 1.0 when every slot the limit allowed was used from the enqueue on. */
  ofLimit: number;
  /** Enqueue resolved → the key's first counted request, s. */
  firstRequestS: number;
  rateLimited: number;
  /** Gaps between the key's consecutive requests in that span, in intervals of its limit, rounded. */
  gaps: number[];
}

export interface InteractiveFigures {
  account: string;
  /** Creates of that account's batch not yet sent when the plate was submitted. */
  bulkWaiting: number;
  submittedAt: number;
  /** Submit → the simulator counted its create; its completion time there; its completedAt → stored. */
  toCreateS: number;
  completionS: number;
  afterCompletionS: number;
  /** Submit → outcome stored. */
  latencyS: number;
  /** Stored − the last bulk batch's finishedAt (negative: before the bulk work completed). */
  afterBulkS: number;
  polls: number;
}

export interface Distribution {
  min: number;
  p10: number;
  median: number;
  max: number;
}

export interface ManyAccountsFigures {
  settings: ManyAccountsSettings;
  redisVersion: string;
  startWorkersS: number;
  /**
   * First contact before the step: one plate on the first account, enqueued → read end to end, s.
   * What one account understood holds for every account of the upstream (src/queue/answers.ts), so
   * the step measures a deployment that has met its upstream, as any has after its first plate.
   */
  firstContactS: number;
  /** The first enqueue's start → the last one resolved, s. */
  enqueueS: number;
  /** The first enqueue's start → the last bulk batch finished, s. */
  wallS: number;
  batches: number;
  batchesFinished: number;
  platesDone: number;
  platesFailed: number;
  /** At the simulator. */
  creates: number;
  polls: number;
  requests: number;
  rateLimited: number;
  duplicateCreates: number;
  /** Counted requests per second over the run, and the densest 1 s; the keys' limits summed. */
  requestsPerS: number;
  peakRequestsPerS: number;
  limitsPerS: number;
  platesPerS: number;
  ofLimit: Distribution;
  firstRequestS: Distribution;
  /**
   * Gaps between a key's consecutive requests while its account had creates waiting, in intervals
   * of its limit (rounded): how many were one interval (no slot missed), two (one slot missed), …
   */
  gapsInIntervals: Record<string, number>;
  /** The accounts below the target, lowest first (at most 10). */
  lowest: AccountUse[];
  belowTarget: number;
  interactive?: InteractiveFigures;
  redis: {
    commandsPerS: number;
    peakCommandsPerS: number;
    /** connected_clients before the workers started, the most seen during the run (sampled each second), at its end. */
    clientsBefore: number;
    peakClients: number;
    clientsAtEnd: number;
    cpuPercent: number;
    commandsPerPlate: number;
    /** Calls per second by command (commandstats), largest first. */
    topCallsPerS: Record<string, number>;
  };
  /** Each worker's user + system CPU over the run ÷ the run, %; the simulator's. */
  workerCpuPercent: number[];
  workerCpuMsPerPlate: number;
  simulatorCpuPercent: number;
  load1: number;
  workerLog: Record<string, number>;
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

const accountId = (i: number) => `acct-${String(i).padStart(4, '0')}`;
const keyOf = (i: number) => `bench-many-${String(i).padStart(4, '0')}-key-0123456789abcdef`;

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1)))]!;
}

function distribution(xs: number[]): Distribution {
  const s = [...xs].sort((a, b) => a - b);
  return { min: s[0] ?? NaN, p10: quantile(s, 0.1), median: quantile(s, 0.5), max: s.at(-1) ?? NaN };
}

function gapCounts(uses: AccountUse[]): Record<string, number> {
  const out: Record<string, number> = { '0': 0, '1': 0, '2': 0, '3': 0, '4+': 0 };
  for (const u of uses)
    for (const g of u.gaps) {
      const k = g >= 4 ? '4+' : String(g);
      out[k] = (out[k] ?? 0) + 1;
    }
  return out;
}

function workerLog(workers: WorkerChild[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const w of workers)
    for (const [msg, n] of w.messages) if (!msg.endsWith('worker started')) out[msg] = (out[msg] ?? 0) + n;
  return out;
}

/** Runs `fn` over `items`, `limit` at a time, in order of start. */
async function inParallel<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

interface Peaks {
  /** Per master: the most clients seen and the densest second of commands. */
  masters: { peakClients: number; peakCommandsPerS: number }[];
  /** All masters together, read at the same sample. */
  peakClients: number;
  peakCommandsPerS: number;
}

/** Samples every master each second: the most clients and the densest second of commands, each and in all. */
function sampleRedis(probes: Probe[]): { stop(): Promise<Peaks> } {
  const peaks: Peaks = {
    masters: probes.map(() => ({ peakClients: 0, peakCommandsPerS: 0 })),
    peakClients: 0,
    peakCommandsPerS: 0,
  };
  let last: Snapshot[] | undefined;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const now = await Promise.all(probes.map((p) => p.snapshot()));
      let clients = 0;
      let commandsPerS = 0;
      now.forEach((s, i) => {
        const m = peaks.masters[i]!;
        m.peakClients = Math.max(m.peakClients, s.clients);
        clients += s.clients;
        const prev = last?.[i];
        if (prev) {
          const rate = commandsBetween(prev, s) / ((s.at - prev.at) / 1000);
          m.peakCommandsPerS = Math.max(m.peakCommandsPerS, rate);
          commandsPerS += rate;
        }
      });
      peaks.peakClients = Math.max(peaks.peakClients, clients);
      peaks.peakCommandsPerS = Math.max(peaks.peakCommandsPerS, commandsPerS);
      last = now;
      await sleep(1_000);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return peaks;
    },
  };
}

/**
 * Waits until every batch's hash has a finishedAt: each second, one pipelined HMGET of those not
 * finished per master, on the probe of the master that holds the batch (`home`), which counts them.
 */
/** One plate on `account`, enqueued and waited for: the upstream's answers are understood from then on. */
async function meetUpstream(vqb: Vqb, home: (b: BatchRef) => Probe, keys: VqbKeys, account: string, plates: string[]) {
  const t = Date.now();
  await vqb.enqueue(plates, { batchId: 'many-first-contact', account });
  const done = await waitFinished(home, keys, [{ id: 'many-first-contact', account }], t + 120_000);
  if (done.size !== 1) throw new Error('first contact: the plate on the first account did not finish in 120 s');
  return (Date.now() - t) / 1000;
}

async function waitFinished(
  home: (b: BatchRef) => Probe,
  keys: VqbKeys,
  batches: BatchRef[],
  deadline: number,
): Promise<Map<string, { finishedAt: number; done: number; failed: number }>> {
  const finished = new Map<string, { finishedAt: number; done: number; failed: number }>();
  for (;;) {
    const open = batches.filter((b) => !finished.has(b.id));
    if (open.length === 0) return finished;
    const byMaster = new Map<Probe, BatchRef[]>();
    for (const b of open) {
      const refs = byMaster.get(home(b)) ?? [];
      byMaster.set(home(b), refs);
      refs.push(b);
    }
    await Promise.all(
      [...byMaster].map(async ([probe, refs]) => {
        const pipeline = probe.redis.pipeline();
        for (const b of refs) pipeline.hmget(keys.batch(b), 'finishedAt', 'done', 'failed');
        probe.count('hmget', refs.length);
        const replies = (await pipeline.exec()) ?? [];
        refs.forEach(({ id }, i) => {
          const [at, done, failed] = (replies[i]?.[1] ?? []) as (string | null)[];
          if (at) finished.set(id, { finishedAt: Number(at), done: Number(done ?? 0), failed: Number(failed ?? 0) });
        });
      }),
    );
    if (finished.size === batches.length) return finished;
    if (Date.now() > deadline) return finished;
    await sleep(1_000);
  }
}

/** Each account's use of its key from its batch's enqueue to its last create, from the simulator's own times. */
function accountUse(
  id: string,
  enqueuedAt: number,
  times: { creates: number[]; gets: number[] } | undefined,
  limitPerS: number,
  rateLimited: number,
): AccountUse | undefined {
  if (!times || times.creates.length === 0) return undefined;
  const lastCreate = Math.max(...times.creates);
  const within = (t: number) => t >= enqueuedAt && t <= lastCreate;
  const requests = times.creates.filter(within).length + times.gets.filter(within).length;
  const waitingS = (lastCreate - enqueuedAt) / 1000;
  const first = Math.min(...times.creates, ...times.gets);
  const sent = [...times.creates, ...times.gets].filter(within).sort((x, y) => x - y);
  const gaps = sent.slice(1).map((t, i) => Math.round(((t - sent[i]!) / 1000) * limitPerS));
  return {
    account: id,
    waitingS: round(waitingS, 2),
    requests,
    creates: times.creates.filter(within).length,
    // One slot at the span's start plus one per interval of the limit: a key used from its
    // enqueue on at exactly its limit scores 1.0, whatever the span's length.
    ofLimit: round(requests / (waitingS * limitPerS + 1), 3),
    firstRequestS: round((first - enqueuedAt) / 1000, 2),
    rateLimited,
    gaps,
  };
}

/** Where the scenario's Redis is: one server, or the masters of a cluster, each read directly. */
export interface ManyRedis {
  /** What the workers and the bench's library instance are told: REDIS_URL, and VQ_REDIS_MODE for a cluster. */
  env: Record<string, string>;
  /** For the log: what was started. */
  label: string;
  /** One Probe per master (a direct connection to it), in a fixed order. */
  probes: Probe[];
  /** For each hash tag, the index in `probes` of the master holding its slot. */
  ownersOf(tags: string[]): Promise<number[]>;
  /** How many of the 16,384 hash slots each master holds (a cluster's; absent for one server). */
  hashSlots?: number[];
  close(): Promise<void>;
}

/** A redis-server of the step's own (a free port, saving nothing): no other client's traffic in its counters. */
export async function singleRedis(): Promise<ManyRedis> {
  const server = await startThrowawayRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: 2, connectionName: 'vqb-bench-many' });
  return {
    env: { REDIS_URL: server.url },
    label: `dedicated redis-server at ${server.url}`,
    probes: [new Probe(redis)],
    ownersOf: async (tags) => tags.map(() => 0),
    async close() {
      redis.disconnect();
      await server.close();
    },
  };
}

/** One master's part of a run: its counters over the run (the step's own calls subtracted). */
export interface MasterFigures {
  port: number;
  /** Hash slots it holds (a cluster's master). */
  hashSlots?: number;
  /** Accounts whose slot this master holds; whether it holds the prefix's (global) slot too. */
  accounts: number;
  globalSlot: boolean;
  commandsPerS: number;
  peakCommandsPerS: number;
  /** Its share of all masters' commands. */
  commandShare: number;
  /** used_cpu_user + used_cpu_sys over the run ÷ the run: the share of one core it used, %. */
  cpuPercent: number;
  cpuMsPerPlate: number;
  clientsBefore: number;
  peakClients: number;
  clientsAtEnd: number;
}

export async function measureManyAccounts(ctx: StepContext, s: ManyAccountsSettings): Promise<ManyAccountsFigures> {
  return (await runManyAccounts(ctx, s, await singleRedis())).figures;
}

/**
 * The scenario on `target` (closed at the end, whatever happens): the figures of the `many` step,
 * Redis's summed over the masters, and each master's own.
 */
export async function runManyAccounts(
  ctx: StepContext,
  s: ManyAccountsSettings,
  target: ManyRedis,
): Promise<{ figures: ManyAccountsFigures; masters: MasterFigures[] }> {
  // The workers inherit the bench's environment (bench/procs.ts): a VQ_* setting there is part of what was measured.
  const workerEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('VQ_'))) as Record<
    string,
    string
  >;
  if (Object.keys(workerEnv).length > 0) s = { ...s, workerEnv };
  const probes = target.probes;
  const dir = await mkdtemp(join(tmpdir(), 'vqb-bench-many-'));
  const ids = Array.from({ length: s.accounts }, (_, i) => accountId(i));
  let sim: SimChild | undefined;
  const workers: WorkerChild[] = [];
  let vqb: Vqb | undefined;
  ctx.log(`    ${target.label}; ${s.accounts} keys at ${s.keyLimit}, learned (auto)`);
  try {
    const limit = parseRateLimit(s.keyLimit);
    if (!limit) throw new Error(`bad key limit ${s.keyLimit}`);
    const limitPerS = perSecond({ rateLimit: limit });
    const redisVersion = /^redis_version:(.*)$/m.exec(await probes[0]!.redis.info('server'))?.[1]?.trim() ?? 'unknown';
    sim = await startSimChildWithConfig({
      keys: ids.map((id, i) => ({ key: keyOf(i), label: id, rateLimit: s.keyLimit })),
      window: 'sliding',
      completionMs: s.completionMs,
      dailyQuota: 1_000_000_000,
    });
    const file = join(dir, 'accounts.json');
    // `auto`: each account learns its key's limit from the simulator's X-RateLimit headers.
    await writeFile(
      file,
      JSON.stringify({ accounts: ids.map((id, i) => ({ id, apiKey: keyOf(i), rateLimit: 'auto' })) }),
    );
    const prefix = `{vqbbench-many-${randomBytes(4).toString('hex')}}`;
    const settings = { ...target.env, VQ_PREFIX: prefix, VQ_BASE_URL: sim.url, VQ_ACCOUNTS_FILE: file };
    const before = await Promise.all(probes.map((p) => p.snapshot()));
    const t = Date.now();
    // One at a time: a process's start-up is CPU-bound, and the bench has two cores.
    for (let i = 0; i < s.workers; i++) workers.push(await startWorkerChild({ ...settings, LOG_LEVEL: 'info' }));
    const startWorkersS = (Date.now() - t) / 1000;
    vqb = await createVqb({ env: {}, settings: { ...settings, LOG_LEVEL: 'silent' } as Overrides, workers: false });
    const keys = new VqbKeys({ prefix, queueName: vqb.config.queueName });
    // Which master holds each account's slot, and the prefix's own (the structures every account shares).
    const [globalOwner, ...owners] = await target.ownersOf([
      barePrefix(prefix),
      ...ids.map((id) => keys.accountTag(id)),
    ]);
    const ownerOf = new Map(ids.map((id, i) => [id, owners[i]!]));
    const home = (b: BatchRef) => probes[ownerOf.get(b.account) ?? 0]!;
    const from = ctx.allocatePlates(s.accounts * s.platesPerAccount + 2);
    const firstContactS = await meetUpstream(
      vqb,
      home,
      keys,
      ids[0]!,
      platesFrom(from + s.accounts * s.platesPerAccount + 1, 1),
    );
    ctx.log(
      `    first contact (one plate on ${ids[0]}, for every account of the upstream): ${firstContactS.toFixed(1)} s`,
    );
    await sleep(2_000);
    await sim.reset();

    const sampler = sampleRedis(probes);
    const a = await Promise.all(probes.map((p) => p.snapshot()));
    const cpu0 = workers.map((w) => w.cpuSeconds());
    const simCpu0 = processCpuSeconds(sim.pid);
    const t0 = Date.now();
    const enqueuedAt = new Map<string, number>();
    const producer = vqb;
    await inParallel(
      ids.map((id, i) => ({ id, i })),
      s.enqueueConcurrency,
      async ({ id, i }) => {
        await producer.enqueue(platesFrom(from + i * s.platesPerAccount, s.platesPerAccount), {
          batchId: `many-${id}`,
          account: id,
        });
        enqueuedAt.set(id, Date.now());
      },
    );
    const enqueueS = (Date.now() - t0) / 1000;
    ctx.log(`    ${s.accounts} batches enqueued in ${enqueueS.toFixed(1)} s`);

    // Submitted last, on the account whose batch went first: it has had the longest to get going,
    // and still has creates waiting at the rate chosen.
    const interactiveAccount = ids[0]!;
    const interactivePlate = platesFrom(from + s.accounts * s.platesPerAccount, 1)[0]!;
    const bulkWaiting = (await (await vqb.batch(`many-${interactiveAccount}`)).progress()).counts.queued;
    const submittedAt = Date.now();
    await vqb.enqueue([interactivePlate], {
      batchId: 'many-interactive',
      account: interactiveAccount,
      priority: 'interactive',
    });

    const batchRefs = [
      ...ids.map((id) => ({ id: `many-${id}`, account: id })),
      { id: 'many-interactive', account: interactiveAccount },
    ];
    const finished = await waitFinished(home, keys, batchRefs, t0 + s.timeoutMs);
    const b = await Promise.all(probes.map((p) => p.snapshot()));
    const peaks = await sampler.stop();
    const cpuS = workers.map((w, i) => w.cpuSeconds() - cpu0[i]!);
    const simCpuS = processCpuSeconds(sim.pid) - simCpu0;
    const bulkDone = ids.map((id) => finished.get(`many-${id}`)?.finishedAt ?? NaN).filter(Number.isFinite);
    const bulkEnd = bulkDone.length > 0 ? Math.max(...bulkDone) : Date.now();
    const wallS = (bulkEnd - t0) / 1000;
    // The masters' snapshots are read together: their mean span is the run's.
    const seconds = probes.reduce((sum, _, i) => sum + (b[i]!.at - a[i]!.at) / 1000, 0) / probes.length;
    if (finished.size < batchRefs.length)
      ctx.log(`    only ${finished.size} of ${batchRefs.length} batches finished within ${s.timeoutMs / 1000} s`);

    const stats = await sim.stats({ times: true });
    const times = stats.timesByKey ?? {};
    const uses: AccountUse[] = [];
    for (const id of ids) {
      const use = accountUse(id, enqueuedAt.get(id) ?? NaN, times[id], limitPerS, stats.byKey[id]?.rateLimited ?? 0);
      if (use) uses.push(use);
    }
    const all = Object.values(times).flatMap((x) => [...x.creates, ...x.gets]);
    const perSecondCounts = new Map<number, number>();
    for (const at of all)
      perSecondCounts.set(Math.floor(at / 1000), (perSecondCounts.get(Math.floor(at / 1000)) ?? 0) + 1);

    let interactive: InteractiveFigures | undefined;
    const outcome = await vqb.services.outcomes.get(
      { id: 'many-interactive', account: interactiveAccount },
      interactivePlate,
    );
    if (outcome?.status === 'done') {
      const up = upstreamTimes(outcome.result);
      interactive = {
        account: interactiveAccount,
        bulkWaiting,
        submittedAt,
        toCreateS: round((up.createdAt - submittedAt) / 1000, 2),
        completionS: round((up.completedAt - up.createdAt) / 1000, 2),
        afterCompletionS: round((outcome.finishedAt - up.completedAt) / 1000, 2),
        latencyS: round((outcome.finishedAt - submittedAt) / 1000, 2),
        afterBulkS: round((outcome.finishedAt - bulkEnd) / 1000, 2),
        polls: outcome.polls,
      };
    }

    const sorted = [...uses].sort((x, y) => x.ofLimit - y.ofLimit);
    const plates = s.accounts * s.platesPerAccount + 1;
    const served = probes.map((_, i) => commandsBetween(a[i]!, b[i]!));
    const commands = served.reduce((x, y) => x + y, 0);
    const redisCpuS = probes.map((_, i) => b[i]!.cpuS - a[i]!.cpuS);
    const calls = new Map<string, number>();
    probes.forEach((_, i) => {
      for (const [cmd, n] of callsBetween(a[i]!, b[i]!)) calls.set(cmd, (calls.get(cmd) ?? 0) + n);
    });
    const sum = (xs: number[]) => xs.reduce((x, y) => x + y, 0);
    const masters: MasterFigures[] = probes.map((probe, i) => ({
      port: probe.redis.options.port ?? 0,
      ...(target.hashSlots ? { hashSlots: target.hashSlots[i]! } : {}),
      accounts: owners.filter((o) => o === i).length,
      globalSlot: globalOwner === i,
      commandsPerS: round(served[i]! / seconds, 0),
      peakCommandsPerS: round(peaks.masters[i]!.peakCommandsPerS, 0),
      commandShare: round(served[i]! / commands, 3),
      cpuPercent: round((redisCpuS[i]! / seconds) * 100, 1),
      cpuMsPerPlate: round((redisCpuS[i]! * 1000) / plates, 3),
      clientsBefore: before[i]!.clients,
      peakClients: peaks.masters[i]!.peakClients,
      clientsAtEnd: b[i]!.clients,
    }));
    const figures: ManyAccountsFigures = {
      settings: s,
      redisVersion,
      startWorkersS: round(startWorkersS, 1),
      firstContactS: round(firstContactS, 1),
      enqueueS: round(enqueueS, 1),
      wallS: round(wallS, 1),
      batches: batchRefs.length,
      batchesFinished: finished.size,
      platesDone: [...finished.values()].reduce((sum, f) => sum + f.done, 0),
      platesFailed: [...finished.values()].reduce((sum, f) => sum + f.failed, 0),
      creates: stats.creates,
      polls: stats.gets,
      requests: stats.requests,
      rateLimited: stats.rateLimited,
      duplicateCreates: stats.duplicateCreates,
      requestsPerS: round(stats.counted / wallS, 1),
      peakRequestsPerS: Math.max(0, ...perSecondCounts.values()),
      limitsPerS: round(s.accounts * limitPerS, 1),
      platesPerS: round(plates / wallS, 1),
      ofLimit: distribution(uses.map((u) => u.ofLimit)),
      firstRequestS: distribution(uses.map((u) => u.firstRequestS)),
      gapsInIntervals: gapCounts(uses),
      lowest: sorted.filter((u) => u.ofLimit < MANY_TARGETS.ofLimit).slice(0, 10),
      belowTarget: uses.filter((u) => u.ofLimit < MANY_TARGETS.ofLimit).length + (s.accounts - uses.length),
      ...(interactive ? { interactive } : {}),
      // All masters together (one server: its own figures).
      redis: {
        commandsPerS: round(commands / seconds, 0),
        peakCommandsPerS: round(peaks.peakCommandsPerS, 0),
        clientsBefore: sum(before.map((x) => x.clients)),
        peakClients: peaks.peakClients,
        clientsAtEnd: sum(b.map((x) => x.clients)),
        cpuPercent: round((sum(redisCpuS) / seconds) * 100, 1),
        commandsPerPlate: round(commands / plates, 1),
        topCallsPerS: Object.fromEntries(
          [...calls]
            .sort((x, y) => y[1] - x[1])
            .slice(0, 12)
            .map(([cmd, n]) => [cmd, round(n / seconds, 0)]),
        ),
      },
      workerCpuPercent: cpuS.map((c) => round((c / seconds) * 100, 1)),
      workerCpuMsPerPlate: round((cpuS.reduce((x, y) => x + y, 0) * 1000) / plates, 2),
      simulatorCpuPercent: round((simCpuS / seconds) * 100, 1),
      load1: round(loadavg()[0]!, 2),
      workerLog: workerLog(workers),
    };
    ctx.log(
      `    ${figures.batchesFinished}/${figures.batches} batches in ${figures.wallS} s, ${figures.rateLimited} 429s, ` +
        `of limit min ${figures.ofLimit.min} p10 ${figures.ofLimit.p10} median ${figures.ofLimit.median}, ` +
        `${figures.redis.commandsPerS} commands/s, ${figures.redis.peakClients} clients`,
    );
    return { figures, masters };
  } finally {
    await vqb?.close().catch(() => undefined);
    await Promise.allSettled(workers.map((w) => w.stop()));
    await sim?.stop();
    await target.close();
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Tables

const mark = (ok: boolean) => (ok ? ' ✓' : ' ✗');

/** The step's figures as table rows: figure, measured, target (bench/cluster.ts sets two runs' side by side). */
export function manyRows(f: ManyAccountsFigures): string[][] {
  const t = MANY_TARGETS;
  const s = f.settings;
  const i = f.interactive;
  const out: string[][] = [
    [
      'batches finished (6 plates each, + the interactive one)',
      `${f.batchesFinished} of ${f.batches}${mark(f.batchesFinished === f.batches)}`,
      'all',
    ],
    ['plates done / failed', `${f.platesDone} / ${f.platesFailed}`, ''],
    ['429s at the simulator', `${f.rateLimited}${mark(f.rateLimited === t.rateLimited)}`, '0'],
    [
      "each key's requests while its account had creates waiting ÷ its limit: min / p10 / median",
      `${f.ofLimit.min.toFixed(2)} / ${f.ofLimit.p10.toFixed(2)} / ${f.ofLimit.median.toFixed(2)}${mark(f.ofLimit.min >= t.ofLimit)}`,
      `each ≥ ${t.ofLimit}`,
    ],
    ['accounts below the target', String(f.belowTarget), '0'],
    [
      "gaps between a key's requests meanwhile, in intervals of its limit: 0 / 1 / 2 / 3 / 4+",
      ['0', '1', '2', '3', '4+'].map((k) => (f.gapsInIntervals[k] ?? 0).toLocaleString('en')).join(' / '),
      'all 1',
    ],
    [
      "enqueue → the key's first request, s: median / p10 … max",
      `${f.firstRequestS.median.toFixed(1)} / ${f.firstRequestS.p10.toFixed(1)} … ${f.firstRequestS.max.toFixed(1)}`,
      '',
    ],
  ];
  if (i)
    out.push(
      [
        'interactive plate (submitted last): stored − bulk work completed, s',
        `${i.afterBulkS.toFixed(1)}${mark(i.afterBulkS <= t.interactiveAfterBulkS)}`,
        `≤ ${t.interactiveAfterBulkS}`,
      ],
      [
        '… submit → create at the simulator / upstream completion / completion → stored, s',
        `${i.toCreateS.toFixed(1)} / ${i.completionS.toFixed(1)} / ${i.afterCompletionS.toFixed(1)} (${i.polls} polls; ${i.bulkWaiting} creates of its account waiting)`,
        '',
      ],
    );
  else out.push(['interactive plate (submitted last)', 'not stored ✗', '']);
  out.push(
    ['creates / polls paid (simulator)', `${f.creates.toLocaleString('en')} / ${f.polls.toLocaleString('en')}`, ''],
    ['duplicate creates (simulator)', String(f.duplicateCreates), '0'],
    [
      'first contact before the step: one plate, then every account of the upstream understood, s',
      f.firstContactS === undefined ? '—' : f.firstContactS.toFixed(1),
      '',
    ],
    [
      'wall s (first enqueue → last batch finished); enqueue of every batch',
      `${f.wallS.toFixed(1)}; ${f.enqueueS.toFixed(1)}`,
      '',
    ],
    [
      'plates/s; requests/s (densest 1 s) vs the keys’ limits summed',
      `${f.platesPerS.toFixed(1)}; ${f.requestsPerS.toFixed(1)} (${f.peakRequestsPerS}) vs ${f.limitsPerS}`,
      '',
    ],
    [
      'Redis commands/s (densest 1 s); per plate',
      `${f.redis.commandsPerS.toLocaleString('en')} (${f.redis.peakCommandsPerS.toLocaleString('en')}); ${f.redis.commandsPerPlate.toFixed(0)}`,
      '',
    ],
    [
      'Redis clients: before the workers / peak / at the end',
      `${f.redis.clientsBefore} / ${f.redis.peakClients} / ${f.redis.clientsAtEnd}`,
      '',
    ],
    ['redis-server CPU %', f.redis.cpuPercent.toFixed(1), ''],
    [
      `worker CPU % (${s.workers} processes); ms per plate`,
      `${f.workerCpuPercent.map((x) => x.toFixed(0)).join(' / ')}; ${f.workerCpuMsPerPlate.toFixed(1)}`,
      '',
    ],
    ['simulator CPU %; 1-minute load at the end', `${f.simulatorCpuPercent.toFixed(0)}; ${f.load1.toFixed(2)}`, ''],
    [
      'top Redis calls/s (commandstats)',
      Object.entries(f.redis.topCallsPerS)
        .slice(0, 6)
        .map(([cmd, n]) => `${cmd} ${n.toLocaleString('en')}`)
        .join(', '),
      '',
    ],
  );
  return out;
}

export function manyTitle(f: ManyAccountsFigures): string {
  const s = f.settings;
  const [lo, hi] = s.completionMs;
  const env = Object.entries(s.workerEnv ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return `${s.accounts.toLocaleString('en')} accounts (a key each at ${s.keyLimit}, learned from the headers), ${s.workers} \`vqb work\` processes${env ? ` with ${env}` : ''}, a ${s.platesPerAccount}-plate batch on every account, queries complete in ${lo / 1000}–${hi / 1000} s`;
}

export const MANY_METHOD = `A redis-server of the step's own (a free port); a simulator with one key per account, each
its own sliding-window limit, announced in its X-RateLimit headers; an accounts file with
\`rateLimit: "auto"\` for every account (vqb learns each limit from the answers); the workers started
one after the other, then every batch enqueued through the library (16 at a time), then one
\`interactive\` plate on the first account. Counted at the simulator (\`/__stats?times=1\`: every counted
request's arrival per key): creates, polls, 429s, and for each account its key's requests (creates and
polls, which take the same limit and go first by design) from the moment its batch's enqueue returned to
its last create, ÷ (that span × the limit + 1), so a key used at exactly its limit from the enqueue on
scores 1.0. Redis: INFO deltas over the run (the step's own INFO and HMGET calls subtracted), clients
sampled each second. CPU: user + system from \`/proc/<pid>/stat\`, ÷ the run.`;

/** The lines under a run's table: its lowest accounts, and the worker log lines above info ('' when none). */
export function manyNotes(f: ManyAccountsFigures): { lowest: string; log: string } {
  const lowest =
    f.lowest.length > 0
      ? `lowest accounts: ${f.lowest.map((u) => `${u.account} ${u.ofLimit} (${u.requests} requests in ${u.waitingS} s, first after ${u.firstRequestS} s, gaps ${u.gaps.join(' ')})`).join('; ')}`
      : '';
  const log = Object.entries(f.workerLog)
    .filter(([msg]) => !msg.startsWith('info'))
    .map(([msg, n]) => `${msg} ×${n}`)
    .join('; ');
  return { lowest, log };
}

export function manyAccountsTables(f: ManyAccountsFigures): { text: string; markdown: string } {
  const head = ['figure', 'measured', 'target'];
  const cells = manyRows(f);
  const { lowest, log } = manyNotes(f);
  return {
    text: [`${manyTitle(f)}\n${text(head, cells)}`, lowest, log ? `worker log: ${log}` : ''].filter(Boolean).join('\n'),
    markdown: [
      '## Many accounts at once (issue 21)',
      '',
      `Redis ${f.redisVersion}. ${MANY_METHOD}`,
      '',
      `**${manyTitle(f)}**`,
      '',
      markdown(head, cells),
      '',
      ...(lowest ? [lowest, ''] : []),
      ...(log ? [`Worker log lines other than info: ${log}`, ''] : []),
    ].join('\n'),
  };
}
