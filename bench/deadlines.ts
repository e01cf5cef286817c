// Deadlines (docs/plans.md) on one key of the shared simulator (R per second, completion 2-6 s),
// its limit learned (`auto`, nothing typed): one `vqb work` process, a producer in this process.
//   eta:    a loop of small batches, each first judged by the dry run (its ETA range), then run:
//           does the range hold the real finish (the last result stored)?
//   edf:    three batches with deadlines, one of them infeasible: said at enqueue with its ETA
//           range; do the two feasible ones finish before their deadlines? The same three batches
//           again with equal weights and no deadlines: when do the same two finish (one misses)?
// 429s are counted at the simulator over both parts (after the warm-up's first contact). One
// `vqb work` process and one fleet for all of it: the runs follow one another on the same key.
import type { Vqb } from '../src/index.js';
import { BENCH_KEY, platesFrom, sleep } from './common.js';
import { type Fleet, startFleet } from './fleet.js';
import type { StepContext } from './upstream.js';

export interface DeadlineSettings {
  /** ETA runs and each one's plates. */
  etaRuns: number;
  etaPlates: number;
  /** The three batches: plates, and deadline in seconds from the enqueue (the infeasible one first). */
  batches: { name: string; plates: number; withinS: number }[];
}

export function deadlineSettings(quick: boolean): DeadlineSettings {
  return {
    etaRuns: quick ? 4 : 10,
    etaPlates: 20,
    batches: [
      { name: 'rush', plates: 300, withinS: 15 },
      { name: 'a', plates: 100, withinS: 30 },
      { name: 'b', plates: 150, withinS: 52 },
    ],
  };
}

export interface EtaRun {
  plates: number;
  fromS: number;
  toS: number;
  finishS: number;
  contained: boolean;
}

export interface DeadlineBatchResult {
  name: string;
  plates: number;
  withinS: number;
  /** At enqueue. */
  feasibility: string;
  line: string;
  /** Enqueue → finished, s (NaN: not finished when the run stopped). */
  withDeadlinesS: number;
  /** The same batch with equal weights and no deadline. */
  byWeightS: number;
}

export interface DeadlineResult {
  eta: EtaRun[];
  etaContained: number;
  batches: DeadlineBatchResult[];
  /** The feasible batches that finished in time: with deadlines, and by weight alone. */
  inTimeWithDeadlines: number;
  inTimeByWeight: number;
  feasible: number;
  rateLimited: number;
}

async function finishedAt(vqb: Vqb, id: string, until: number): Promise<number> {
  for (;;) {
    const info = await vqb.services.batchViews.get(id);
    if (info.finishedAt !== undefined) return info.finishedAt;
    if (Date.now() > until) return Number.NaN;
    await sleep(100);
  }
}

/** The three batches at once; with deadlines (judged at enqueue) or by equal weights; until the feasible ones end. */
async function threeBatches(
  ctx: StepContext,
  fleet: Fleet,
  s: DeadlineSettings,
  withDeadlines: boolean,
): Promise<{ feasibility: string; line: string; tookS: number }[]> {
  const start = Date.now();
  const enqueued = [];
  for (const b of s.batches) {
    const from = ctx.allocatePlates(b.plates);
    const batch = await fleet.vqb.enqueue(platesFrom(from, b.plates), {
      batchId: `${withDeadlines ? 'dl' : 'w'}-${b.name}`,
      ...(withDeadlines ? { deadline: `${b.withinS}s` } : {}),
    });
    if (batch.deadline) ctx.log(`    ${b.name}: ${batch.deadline.line}`);
    enqueued.push(batch);
  }
  const until = start + 120_000;
  // The infeasible one is not waited for: the figures are the other two's.
  const took = await Promise.all(
    enqueued.map(async (batch, i) =>
      i === 0 ? Number.NaN : ((await finishedAt(fleet.vqb, batch.id, until)) - start) / 1000,
    ),
  );
  return enqueued.map((batch, i) => ({
    feasibility: batch.deadline?.feasibility ?? '',
    line: batch.deadline?.line ?? '',
    tookS: took[i]!,
  }));
}

export async function measureDeadlines(ctx: StepContext, s: DeadlineSettings): Promise<DeadlineResult> {
  const run = async (label: string): Promise<Fleet> =>
    startFleet(ctx, {
      label,
      workers: 1,
      upstreamUrl: ctx.sim.url,
      accounts: [{ id: 'default', key: BENCH_KEY, rateLimit: 'auto' }],
    });
  await ctx.sim.reset();
  const fleet = await run('deadlines');
  const eta: EtaRun[] = [];
  let results: { feasibility: string; line: string; tookS: number }[];
  let byWeight: { tookS: number }[];
  let rateLimited: number;
  try {
    // First contact and the first answers: the limit is announced, the answer time learned. The
    // 429s are counted from here on (a first contact's are the learning's, measured in `learned`).
    const warm = await fleet.vqb.enqueue(platesFrom(ctx.allocatePlates(30), 30), { batchId: 'warm' });
    await warm.done({ pollMs: 100, timeoutMs: 120_000 });
    const before = (await ctx.sim.stats()).rateLimited;
    for (let k = 0; k < s.etaRuns; k++) {
      const plates = platesFrom(ctx.allocatePlates(s.etaPlates), s.etaPlates);
      const judged = await fleet.vqb.estimate(plates, { batchId: `eta-${k}`, deadline: '1h' });
      const start = Date.now();
      const range = judged.deadline?.eta;
      await fleet.vqb.enqueue(plates, { batchId: `eta-${k}` });
      const finish = await finishedAt(fleet.vqb, `eta-${k}`, start + 120_000);
      if (!range) throw new Error(`eta run ${k}: no ETA range (${judged.deadline?.line})`);
      const r: EtaRun = {
        plates: s.etaPlates,
        fromS: (Date.parse(range.from) - start) / 1000,
        toS: (Date.parse(range.to) - start) / 1000,
        finishS: (finish - start) / 1000,
        contained: Date.parse(range.from) <= finish && finish <= Date.parse(range.to),
      };
      eta.push(r);
      ctx.log(
        `    eta ${k + 1}: ${r.fromS.toFixed(1)}–${r.toS.toFixed(1)} s, finished ${r.finishS.toFixed(1)} s ${r.contained ? '✓' : '✗'}`,
      );
    }
    results = await threeBatches(ctx, fleet, s, true);
    byWeight = await threeBatches(ctx, fleet, s, false);
    rateLimited = (await ctx.sim.stats()).rateLimited - before;
  } finally {
    await fleet.stop();
  }
  const batches = s.batches.map((b, i) => ({
    name: b.name,
    plates: b.plates,
    withinS: b.withinS,
    feasibility: results[i]!.feasibility,
    line: results[i]!.line,
    withDeadlinesS: results[i]!.tookS,
    byWeightS: byWeight[i]!.tookS,
  }));
  const feasible = batches.filter((b) => b.feasibility === 'feasible');
  const inTime = (t: number, b: DeadlineBatchResult) => Number.isFinite(t) && t <= b.withinS;
  return {
    eta,
    etaContained: eta.filter((r) => r.contained).length,
    batches,
    inTimeWithDeadlines: feasible.filter((b) => inTime(b.withDeadlinesS, b)).length,
    inTimeByWeight: feasible.filter((b) => inTime(b.byWeightS, b)).length,
    feasible: feasible.length,
    rateLimited,
  };
}
