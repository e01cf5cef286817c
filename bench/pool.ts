// The pool step (docs/plans.md): three simulator keys at 10/s, 20/s and 30/s declared one pool,
// their limits learned (VQ_RATE_LIMIT=auto, announced by the simulator), a 5,000-plate batch
// enqueued to the pool. Measured at the simulator per key: the pool's rate while all three serve
// (÷ 60/s); then the 30/s key expires mid-batch, and the other two's rate from one second after
// (÷ 30/s), how long the expired key's waiting plates took to leave its queue, creates counted at
// the simulator against plates, and whether the batch finished. Every create answers COMPLETED
// at once (one request a plate), so the run stays under three minutes on the 2-core machine.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { noMetrics } from '../src/metrics.js';
import { ingestList } from '../src/producers/enqueue.js';
import { openQueueServices } from '../src/services.js';
import { startSimulator } from '../src/simulator/index.js';
import { startWorker } from '../workers/worker.js';
import { benchPrefix, deleteByPrefix, platesFrom, REDIS_URL, sleep } from './common.js';
import type { StepContext } from './upstream.js';

const KEYS = [
  { id: 'p10', perSecond: 10 },
  { id: 'p20', perSecond: 20 },
  { id: 'p30', perSecond: 30 },
];
const keyOf = (id: string) => `bench-pool-${id}-0123456789abcdef`;

export interface PoolSettings {
  plates: number;
  /**
   * The same three keys each with a batch of its own, no pool, measured over the same window only
   * (`--only pool-baseline`): what this machine gives the keys at that moment, to read the pool's
   * ratio against when the machine is shared.
   */
  baseline?: boolean;
  /** The window all three keys are measured in, after they all sent a first request and a warm-up. */
  warmupMs: number;
  windowMs: number;
}

export function poolSettings(quick: boolean): PoolSettings {
  return quick
    ? { plates: 2_000, warmupMs: 3_000, windowMs: 10_000 }
    : { plates: 5_000, warmupMs: 5_000, windowMs: 30_000 };
}

export interface PoolRun {
  plates: number;
  /** Requests a second the simulator counted for the three keys in the window, ÷ 60. */
  allOfSum: number;
  allPerS: number;
  /** After the 30/s key expired: the other two's requests a second from 1 s after it to the end, ÷ 30. */
  afterOfSum: number;
  afterPerS: number;
  afterSeconds: number;
  /** Ms from the expiry until the expired key's queue held no waiting create. */
  movedMs: number | undefined;
  /** Plates each key created (its counted requests: one a plate). */
  byKey: Record<string, number>;
  creates: number;
  duplicateCreates: number;
  rateLimited: number;
  finished: boolean;
  /** The pool's rate as `vqb status` shows it before and after the expiry. */
  shownBefore: number;
  shownAfter: number;
}

function emptyRun(plates: number): PoolRun {
  return {
    plates,
    allOfSum: 0,
    allPerS: 0,
    afterOfSum: 0,
    afterPerS: 0,
    afterSeconds: 0,
    movedMs: undefined,
    byKey: {},
    creates: 0,
    duplicateCreates: 0,
    rateLimited: 0,
    finished: false,
    shownBefore: 0,
    shownAfter: 0,
  };
}

export async function measurePool(ctx: StepContext, settings: PoolSettings): Promise<PoolRun> {
  const prefix = benchPrefix('pool');
  const sim = await startSimulator({
    window: 'sliding',
    rateLimitHeaders: true,
    terminalOnCreateRate: 1,
    completionMs: [0, 0],
    dailyQuota: 1_000_000_000,
    keys: KEYS.map((k) => ({ key: keyOf(k.id), label: k.id, rateLimit: `${k.perSecond}/s` })),
  });
  const dir = await mkdtemp(join(tmpdir(), 'vqb-bench-pool-'));
  const accountsFile = join(dir, 'accounts.json');
  await writeFile(
    accountsFile,
    JSON.stringify({
      accounts: KEYS.map((k) => ({ id: k.id, apiKey: keyOf(k.id), rateLimit: 'auto', pool: 'bench' })),
    }),
  );
  const config = loadConfig(
    {},
    {
      REDIS_URL,
      VQ_PREFIX: prefix,
      VQ_BASE_URL: sim.url,
      VQ_ACCOUNTS_FILE: accountsFile,
      VQ_CONCURRENCY: '32',
      LOG_LEVEL: 'silent',
    },
  );
  const services = await openQueueServices(config);
  for (const k of KEYS) await services.answers.learn(k.id, { id: '/body/queryId', status: '/body/status' }, Date.now());
  const worker = startWorker(config, { logger: createLogger({ level: 'silent' }), metrics: noMetrics });
  try {
    if (settings.baseline) {
      for (const k of KEYS) {
        const n = Math.ceil((settings.plates * k.perSecond) / 60);
        await ingestList(services, platesFrom(ctx.allocatePlates(n), n), {
          source: 'library',
          account: k.id,
          batchId: `bench-pool-${k.id}`,
        });
      }
    }
    const { batch } = settings.baseline
      ? { batch: { id: 'bench-pool-p10' } }
      : await ingestList(services, platesFrom(ctx.allocatePlates(settings.plates), settings.plates), {
          source: 'library',
          pool: 'bench',
          batchId: 'bench-pool',
        });
    const counted = (id: string) => sim.stats().byKey[id]?.counted ?? 0;
    const sum = (ids: readonly string[]) => ids.reduce((a, id) => a + counted(id), 0);
    // Learned, not configured: the window opens once each key's learned rate is in force (the
    // window of an announced limit is read from its resets, a few answers), then the warm-up.
    const learnedAt = Date.now();
    for (let i = 0; i < 600; i++) {
      const rates = await Promise.all(KEYS.map((k) => services.accounts.line(k.id).rate()));
      if (rates.every((r, j) => r.perSecond >= 0.9 * KEYS[j]!.perSecond)) break;
      await sleep(100);
    }
    const learnS = (Date.now() - learnedAt) / 1_000;
    await sleep(settings.warmupMs);
    const all = KEYS.map((k) => k.id);
    const a0 = { at: Date.now(), n: sum(all) };
    await sleep(settings.windowMs);
    const a1 = { at: Date.now(), n: sum(all) };
    const shownBefore = (await services.pools.states())[0]?.perSecond ?? 0;
    if (settings.baseline) {
      const perS = ((a1.n - a0.n) * 1_000) / (a1.at - a0.at);
      const byKey = Object.fromEntries(all.map((id) => [id, counted(id)]));
      ctx.log(
        `    the same keys unpooled, a batch each: ${perS.toFixed(1)}/s = ${(perS / 60).toFixed(3)} of 60/s; by key ${JSON.stringify(byKey)}; limits learned in ${learnS.toFixed(1)} s`,
      );
      return { ...emptyRun(settings.plates), allPerS: perS, allOfSum: perS / 60, byKey };
    }
    // The 30/s key expires: the others carry on.
    const expiredAt = Date.now();
    sim.keys.expire(keyOf('p30'));
    const others = ['p10', 'p20'];
    let movedMs: number | undefined;
    const queue = services.accounts.queue('p30');
    // Until none of its plates without a create is left with it (waiting, or in a worker for its
    // slot): its created queries stay, their ids are its own.
    while (movedMs === undefined && Date.now() - expiredAt < 10_000) {
      const jobs = await queue.getJobs(['wait', 'prioritized', 'delayed', 'active']);
      if (jobs.every((j) => j?.data?.step !== 'create')) movedMs = Date.now() - expiredAt;
      else await sleep(10);
    }
    await sleep(Math.max(0, 1_000 - (Date.now() - expiredAt)));
    const b0 = { at: Date.now(), n: sum(others) };
    let finished = false;
    let shownAfter = 0;
    const deadline = Date.now() + 240_000;
    while (Date.now() < deadline) {
      if (shownAfter === 0) shownAfter = (await services.pools.states())[0]?.perSecond ?? 0;
      const info = await services.batchViews.get(batch.id);
      if (info.finishedAt !== undefined) {
        finished = true;
        break;
      }
      await sleep(100);
    }
    // The two carry until the batch's last plate: the window ends at its last request.
    const b1 = { at: Math.max(...others.map((id) => sim.stats().byKey[id]?.lastAt ?? Date.now())), n: sum(others) };
    const stats = sim.stats();
    const run: PoolRun = {
      plates: settings.plates,
      allPerS: ((a1.n - a0.n) * 1_000) / (a1.at - a0.at),
      allOfSum: 0,
      afterPerS: ((b1.n - b0.n) * 1_000) / (b1.at - b0.at),
      afterOfSum: 0,
      afterSeconds: (b1.at - b0.at) / 1_000,
      movedMs,
      byKey: Object.fromEntries(all.map((id) => [id, counted(id)])),
      creates: stats.creates,
      duplicateCreates: stats.duplicateCreates,
      rateLimited: Object.values(stats.byKey).reduce((n, k) => n + k.rateLimited, 0),
      finished,
      shownBefore,
      shownAfter,
    };
    run.allOfSum = run.allPerS / 60;
    run.afterOfSum = run.afterPerS / 30;
    ctx.log(
      `    pool of 10+20+30/s (learned in ${learnS.toFixed(1)} s): ${run.allPerS.toFixed(1)}/s = ${run.allOfSum.toFixed(3)} of 60/s; after the 30/s key expired ${run.afterPerS.toFixed(1)}/s = ${run.afterOfSum.toFixed(3)} of 30/s over ${run.afterSeconds.toFixed(0)} s; its waiting plates left its queue in ${movedMs ?? '—'} ms; creates ${run.creates} for ${run.plates} plates (${run.duplicateCreates} twice), 429s ${run.rateLimited}, finished ${finished}; by key ${JSON.stringify(run.byKey)}; shown ${shownBefore.toFixed(1)}/s → ${shownAfter.toFixed(1)}/s`,
    );
    return run;
  } finally {
    await worker.close();
    await services.close();
    await sim.close();
    await deleteByPrefix(ctx.redis, prefix);
    await rm(dir, { recursive: true, force: true });
  }
}
