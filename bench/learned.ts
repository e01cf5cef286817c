// The learned step: vqb paced with `auto` (nothing typed) against a simulated key whose limit it
// is not told, beside the same scenario with the rate configured exactly, measured at the
// simulator per minute: the share of the real limit achieved while creates wait, the 429s, and
// how long it took to reach 0.9 of the limit. A worker and the simulator run in this process, on
// a prefix of their own, with a batch large enough to keep the account busy throughout.
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { noMetrics } from '../src/metrics.js';
import { ingest, rowsFromPlates } from '../src/producers/ingest.js';
import { openQueueServices } from '../src/services.js';
import { startSimulator } from '../src/simulator/index.js';
import { startWorker } from '../workers/worker.js';
import { benchPrefix, deleteByPrefix, platesFrom, REDIS_URL } from './common.js';
import type { StepContext } from './upstream.js';

export interface LearnedScenario {
  name: string;
  /** The key's real limit at the simulator (sliding window), and whether its answers announce it. */
  limit: string;
  perSecond: number;
  headers: boolean;
  /** What vqb is told: `auto`, or a number. */
  configured: string;
  minutes: number;
}

export interface LearnedRun extends LearnedScenario {
  /** Share of the real limit per minute (requests the simulator counted ÷ the limit's requests in a minute). */
  sharePerMinute: number[];
  rateLimitedPerMinute: number[];
  /** Seconds until the first 10 s in which the account made ≥ 0.9 of the limit (undefined: never). */
  convergeS: number | undefined;
  /** The rate in force at the end, and where it came from. */
  endRate: { perSecond: number; source: string };
}

export function learnedScenarios(quick: boolean): LearnedScenario[] {
  const m = quick ? 1 : 3;
  const s = quick ? 1 : 2;
  return [
    {
      name: '300/min per-minute window, headers, auto',
      limit: '300/min',
      perSecond: 5,
      headers: true,
      configured: 'auto',
      minutes: m,
    },
    {
      name: '300/min per-minute window, headers, configured 300/min',
      limit: '300/min',
      perSecond: 5,
      headers: true,
      configured: '300/min',
      minutes: m,
    },
    {
      name: '20/s per-second window, no headers, auto',
      limit: '20/s',
      perSecond: 20,
      headers: false,
      configured: 'auto',
      minutes: s,
    },
    {
      name: '20/s per-second window, no headers, configured 20/s',
      limit: '20/s',
      perSecond: 20,
      headers: false,
      configured: '20/s',
      minutes: s,
    },
    {
      name: '20/s per-second window, no headers, configured 40/s',
      limit: '20/s',
      perSecond: 20,
      headers: false,
      configured: '40/s',
      minutes: s,
    },
  ];
}

export async function measureLearned(ctx: StepContext, scenario: LearnedScenario): Promise<LearnedRun> {
  const prefix = benchPrefix('learned');
  const sim = await startSimulator({
    rateLimit: scenario.limit,
    window: 'sliding',
    rateLimitHeaders: scenario.headers,
    completionMs: [1_000, 3_000],
    keys: [{ key: 'bench-learned-key' }],
  });
  const config = loadConfig(
    {},
    {
      REDIS_URL,
      VQ_PREFIX: prefix,
      VQ_BASE_URL: sim.url,
      VQ_API_KEY: 'bench-learned-key',
      VQ_RATE_LIMIT: scenario.configured,
      VQ_CONCURRENCY: '32',
      VQ_POLL_INITIAL: '2s',
      VQ_POLL_INTERVAL: '1s',
      LOG_LEVEL: 'silent',
    },
  );
  const services = await openQueueServices(config);
  const worker = startWorker(config, { logger: createLogger({ level: 'silent' }), metrics: noMetrics });
  try {
    // Enough plates to keep the account busy: each costs a create and a poll or two.
    const plates = Math.ceil(scenario.perSecond * 60 * scenario.minutes * 0.6) + 50;
    await ingest(
      services,
      { id: 'bench-learned', source: 'library', name: scenario.name },
      rowsFromPlates(platesFrom(ctx.allocatePlates(plates), plates)),
    );
    const t0 = Date.now();
    const counted = () => sim.stats().byKey.key1 ?? { counted: 0, rateLimited: 0 };
    const sharePerMinute: number[] = [];
    const rateLimitedPerMinute: number[] = [];
    let convergeS: number | undefined;
    let minuteStart = counted();
    let slice = counted();
    for (let tick = 1; tick <= scenario.minutes * 6; tick++) {
      await new Promise((r) => setTimeout(r, t0 + tick * 10_000 - Date.now()));
      const now = counted();
      if (convergeS === undefined && (now.counted - slice.counted) / 10 >= 0.9 * scenario.perSecond)
        convergeS = tick * 10;
      slice = now;
      if (tick % 6 === 0) {
        sharePerMinute.push((now.counted - minuteStart.counted) / (scenario.perSecond * 60));
        rateLimitedPerMinute.push(now.rateLimited - minuteStart.rateLimited);
        minuteStart = now;
      }
    }
    const rate = await services.accounts.line('default').rate();
    const run: LearnedRun = {
      ...scenario,
      sharePerMinute,
      rateLimitedPerMinute,
      convergeS,
      endRate: { perSecond: rate.perSecond, source: rate.source },
    };
    ctx.log(
      `    ${scenario.name}: share per minute ${sharePerMinute.map((x) => x.toFixed(2)).join(' ')}; 429s per minute ${rateLimitedPerMinute.join(' ')}; ≥ 0.9 after ${convergeS ?? '—'} s; in force ${rate.perSecond.toFixed(2)}/s (${rate.source})`,
    );
    return run;
  } finally {
    await worker.close();
    await services.close();
    await sim.close();
    await deleteByPrefix(ctx.redis, prefix);
  }
}
