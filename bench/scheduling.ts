// Scheduling between the batches of one account (one `vqb work` process, the shared simulator at R
// per second, sliding window), measured from what vqb stored: each plate's outcome carries our
// `createdAt` and `finishedAt`, and its result the simulator's own `createdAt` and `completedAt`.
//   interactive: 1-plate batches submitted while a large `normal` batch runs, one `interactive`
//                and one `normal` at the same moment: submit → result stored, against the time
//                the upstream took to complete the query.
//   shares:      two `normal` batches, the second submitted `offset` after the first: each one's
//                share of the account's creates in every interval while both have creates waiting.
import type { Outcome } from '../src/index.js';
import { BENCH_KEY, platesFrom, sleep } from './common.js';
import { type Fleet, startFleet } from './fleet.js';
import type { StepContext } from './upstream.js';

export interface SingleLatency {
  batchId: string;
  priority: 'interactive' | 'normal';
  /** Creates of the large batch still waiting when this one was submitted. */
  bulkWaiting: number;
  /** The account's BullMQ queue when this one was submitted (jobs fed, polls sleeping, running). */
  queueAtSubmit: Record<string, number>;
  /** Creates of the large batch (our createdAt) between this one's submit and its own create. */
  bulkCreatesBefore?: number;
  /** Epoch ms: submit, and our createdAt (the create's answer arrived). */
  submittedAt: number;
  createdAt: number;
  /** Submit → outcome stored (our finishedAt), s. */
  latencyS: number;
  /** Submit → the simulator received the create, s. */
  toCreateS: number;
  /** The simulator's completion time for the query (its completedAt − createdAt), s. */
  completionS: number;
  /** The simulator's completedAt → outcome stored, s (poll timing and recording). */
  afterCompletionS: number;
  /** latencyS − completionS: what vqb added to the upstream's own time. */
  excessS: number;
  polls: number;
}

export interface LatencySummary {
  samples: number;
  medianLatencyS: number;
  worstLatencyS: number;
  medianCompletionS: number;
  worstExcessS: number;
  worstToCreateS: number;
  worstAfterCompletionS: number;
  worstBulkCreatesBefore: number;
}

export interface InteractiveResult {
  bulkPlates: number;
  /** Seconds after the large batch's first request when the first pair was submitted. */
  warmupS: number;
  rounds: SingleLatency[];
  interactive: LatencySummary;
  normal: LatencySummary;
  rateLimited: number;
  workerLog: Record<string, number>;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function summarize(samples: SingleLatency[]): LatencySummary {
  const max = (f: (s: SingleLatency) => number) => Math.max(...samples.map(f));
  return {
    samples: samples.length,
    medianLatencyS: median(samples.map((s) => s.latencyS)),
    worstLatencyS: max((s) => s.latencyS),
    medianCompletionS: median(samples.map((s) => s.completionS)),
    worstExcessS: max((s) => s.excessS),
    worstToCreateS: max((s) => s.toCreateS),
    worstAfterCompletionS: max((s) => s.afterCompletionS),
    worstBulkCreatesBefore: max((s) => s.bulkCreatesBefore ?? NaN),
  };
}

/** The simulator's createdAt and completedAt from a stored result, enveloped or bare. */
export function upstreamTimes(result: unknown): { createdAt: number; completedAt: number } {
  const body = (result as { body?: unknown } | undefined)?.body ?? result;
  const b = body as { createdAt?: string; completedAt?: string } | undefined;
  const createdAt = Date.parse(b?.createdAt ?? '');
  const completedAt = Date.parse(b?.completedAt ?? '');
  if (!Number.isFinite(createdAt) || !Number.isFinite(completedAt))
    throw new Error(`no upstream createdAt/completedAt in the stored result: ${JSON.stringify(body).slice(0, 200)}`);
  return { createdAt, completedAt };
}

const oneAccount = (rate: number) => [{ id: 'default', key: BENCH_KEY, rateLimit: `${rate}/s` }];

async function firstRequest(ctx: StepContext, label: string): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const first = (await ctx.sim.stats()).firstRequestAt;
    if (first !== null) return first;
    if (Date.now() > deadline) throw new Error(`${label}: no request reached the simulator within 30 s`);
    await sleep(25);
  }
}

async function submitOne(
  fleet: Fleet,
  plate: string,
  batchId: string,
  priority: 'interactive' | 'normal',
  load: Pick<SingleLatency, 'bulkWaiting' | 'queueAtSubmit'>,
): Promise<SingleLatency> {
  const submittedAt = Date.now();
  const batch = await fleet.vqb.enqueue([plate], { batchId, priority });
  await batch.done({ pollMs: 50, timeoutMs: 300_000 });
  const outcome: Outcome | undefined = await fleet.vqb.services.outcomes.get(
    await fleet.vqb.services.batches.ref(batchId),
    plate,
  );
  if (outcome?.status !== 'done')
    throw new Error(`${batchId}: no done outcome for ${plate} (${outcome?.error?.code ?? 'none stored'})`);
  const up = upstreamTimes(outcome.result);
  const latencyS = (outcome.finishedAt - submittedAt) / 1000;
  const completionS = (up.completedAt - up.createdAt) / 1000;
  return {
    batchId,
    priority,
    ...load,
    submittedAt,
    createdAt: outcome.createdAt ?? NaN,
    latencyS,
    toCreateS: (up.createdAt - submittedAt) / 1000,
    completionS,
    afterCompletionS: (outcome.finishedAt - up.completedAt) / 1000,
    excessS: latencyS - completionS,
    polls: outcome.polls,
  };
}

export async function measureInteractive(
  ctx: StepContext,
  spec: {
    rate: number;
    bulkPlates: number;
    warmupMs: number;
    rounds: number;
    gapMs: number;
    settleMs: number;
    /** The simulator's answer times, from and to (ms): what the deployment learned of them before. */
    answersMs: readonly [number, number];
  },
): Promise<InteractiveResult> {
  await ctx.sim.reset();
  const fleet = await startFleet(ctx, {
    label: 'interactive',
    workers: 1,
    upstreamUrl: ctx.sim.url,
    accounts: oneAccount(spec.rate),
  });
  try {
    // A deployment that met this upstream before (the fleet wrote its answers' shape) knows its
    // answer times too, from first contact and the answers since, as metUpstream states them in
    // the tests. Without them the first round's normal plate waited for the poll learner's 15 s
    // prior (stop 73: created in 0.4 s, its result at 15.7 s).
    const { learner, accounts } = fleet.vqb.services;
    const product = accounts.for('default').account.product;
    await learner.statedSpread(product, ...spec.answersMs);
    const from = ctx.allocatePlates(spec.bulkPlates + 2 * spec.rounds);
    const bulk = await fleet.vqb.enqueue(platesFrom(from, spec.bulkPlates), { batchId: 'bulk', priority: 'normal' });
    const first = await firstRequest(ctx, 'interactive');
    await sleep(first + spec.warmupMs - Date.now());
    const rounds: SingleLatency[] = [];
    for (let k = 0; k < spec.rounds; k++) {
      const load = {
        bulkWaiting: (await bulk.progress()).counts.queued,
        queueAtSubmit: await fleet.vqb.services.accounts
          .queue('default')
          .getJobCounts('prioritized', 'wait', 'active', 'delayed'),
      };
      if (load.bulkWaiting === 0)
        throw new Error(
          'the large batch has no creates waiting any more: the 1-plate batches would not be measured under load',
        );
      const [plateI, plateN] = platesFrom(from + spec.bulkPlates + 2 * k, 2) as [string, string];
      // Both at the same moment: the interactive one goes first in its class, the normal one takes its fair share.
      const pair = await Promise.all([
        submitOne(fleet, plateI, `interactive-${k + 1}`, 'interactive', load),
        submitOne(fleet, plateN, `single-${k + 1}`, 'normal', load),
      ]);
      rounds.push(...pair);
      ctx.log(
        `    round ${k + 1}: interactive ${pair[0].latencyS.toFixed(2)} s (upstream ${pair[0].completionS.toFixed(2)} s), normal ${pair[1].latencyS.toFixed(2)} s (upstream ${pair[1].completionS.toFixed(2)} s)`,
      );
      await sleep(spec.gapMs);
    }
    // How many of the large batch's creates each 1-plate batch waited behind: the large batch's
    // plates created up to the last round have finished once a completion time and a poll passed.
    await sleep(spec.settleMs);
    const bulkCreates = await createTimes(fleet, 'bulk');
    for (const r of rounds)
      r.bulkCreatesBefore = bulkCreates.filter((t) => t > r.submittedAt && t < r.createdAt).length;
    const stats = await ctx.sim.stats();
    return {
      bulkPlates: spec.bulkPlates,
      warmupS: spec.warmupMs / 1000,
      rounds,
      interactive: summarize(rounds.filter((r) => r.priority === 'interactive')),
      normal: summarize(rounds.filter((r) => r.priority === 'normal')),
      rateLimited: stats.rateLimited,
      workerLog: fleet.workerLog(),
    };
  } finally {
    await fleet.stop();
  }
}

export interface ShareInterval {
  /** Seconds after the second batch was submitted. */
  fromS: number;
  creates: [number, number];
  share: [number, number];
}

export interface ShareResult {
  weights: [number, number];
  /** Each batch's expected share while both have creates waiting: its weight ÷ the sum. */
  expected: [number, number];
  plates: [number, number];
  offsetS: number;
  intervalS: number;
  /** From the second batch's submit to the last create of the batch that ran out of creates first. */
  bothWaitingS: number;
  intervals: ShareInterval[];
  /** Lowest and highest share of each batch over the intervals. */
  min: [number, number];
  max: [number, number];
  /** Submit → first create (our createdAt) of the second batch, s. */
  secondFirstCreateS: number;
  rateLimited: number;
  wallS: number;
  workerLog: Record<string, number>;
}

export interface ShareSpec {
  rate: number;
  weights: [number, number];
  offsetMs: number;
  intervalMs: number;
  /** Whole intervals the two batches should share at least (their sizes follow from it). */
  intervals: number;
}

/** Creates our timestamps say the batch made, sorted. */
async function createTimes(fleet: Fleet, batchId: string): Promise<number[]> {
  const times: number[] = [];
  for await (const o of fleet.vqb.services.outcomes.scan(await fleet.vqb.services.batches.ref(batchId)))
    if (o.createdAt !== undefined) times.push(o.createdAt);
  return times.sort((a, b) => a - b);
}

export async function measureShares(ctx: StepContext, label: string, spec: ShareSpec): Promise<ShareResult> {
  const [wa, wb] = spec.weights;
  const expected: [number, number] = [wa / (wa + wb), wb / (wa + wb)];
  // About R/2 creates a second (each plate costs a create and about one poll); 20 % to spare so
  // both batches still have creates waiting after the planned intervals.
  const createsPerS = spec.rate / 2;
  const shared = (createsPerS * spec.intervals * spec.intervalMs) / 1000;
  const plates: [number, number] = [
    Math.ceil((createsPerS * spec.offsetMs) / 1000 + expected[0] * shared * 1.2),
    Math.ceil(expected[1] * shared * 1.2),
  ];
  await ctx.sim.reset();
  const fleet = await startFleet(ctx, { label, workers: 1, upstreamUrl: ctx.sim.url, accounts: oneAccount(spec.rate) });
  try {
    const from = ctx.allocatePlates(plates[0] + plates[1]);
    const ids = [`${label}-first`, `${label}-second`] as const;
    const t0 = Date.now();
    const first = await fleet.vqb.enqueue(platesFrom(from, plates[0]), {
      batchId: ids[0],
      priority: 'normal',
      weight: wa,
    });
    await sleep(t0 + spec.offsetMs - Date.now());
    const tB = Date.now();
    const second = await fleet.vqb.enqueue(platesFrom(from + plates[0], plates[1]), {
      batchId: ids[1],
      priority: 'normal',
      weight: wb,
    });
    if ((await first.progress()).counts.queued === 0)
      throw new Error(`${label}: the first batch had no creates waiting when the second arrived`);
    const timeoutMs = ((plates[0] + plates[1]) / createsPerS) * 2_000 + 60_000;
    await Promise.all([first.done({ pollMs: 250, timeoutMs }), second.done({ pollMs: 250, timeoutMs })]);
    const wallS = (Date.now() - t0) / 1000;
    const [a, b] = [await createTimes(fleet, ids[0]), await createTimes(fleet, ids[1])];
    const end = Math.min(a.at(-1) ?? tB, b.at(-1) ?? tB);
    const count = (xs: number[], lo: number, hi: number) => xs.filter((t) => t >= lo && t < hi).length;
    const intervals: ShareInterval[] = [];
    for (let lo = tB; lo + spec.intervalMs <= end; lo += spec.intervalMs) {
      const creates: [number, number] = [count(a, lo, lo + spec.intervalMs), count(b, lo, lo + spec.intervalMs)];
      const total = creates[0] + creates[1];
      intervals.push({ fromS: (lo - tB) / 1000, creates, share: [creates[0] / total, creates[1] / total] });
    }
    const pick = (f: (...xs: number[]) => number, i: 0 | 1) => f(...intervals.map((x) => x.share[i]));
    return {
      weights: spec.weights,
      expected,
      plates,
      offsetS: spec.offsetMs / 1000,
      intervalS: spec.intervalMs / 1000,
      bothWaitingS: (end - tB) / 1000,
      intervals,
      min: [pick(Math.min, 0), pick(Math.min, 1)],
      max: [pick(Math.max, 0), pick(Math.max, 1)],
      secondFirstCreateS: ((b[0] ?? NaN) - tB) / 1000,
      rateLimited: (await ctx.sim.stats()).rateLimited,
      wallS,
      workerLog: fleet.workerLog(),
    };
  } finally {
    await fleet.stop();
  }
}
