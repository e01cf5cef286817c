// Per-account pacing: accounts, each with its own simulator key and limit (sliding window), served
// at once by the same `vqb work` processes, each under a standing backlog. A window of fixed
// length opens a few seconds after every key has sent its first request; each account's figure
// is the requests its key had counted in that window ÷ the window ÷ its limit, from the
// simulator's per-key stats (`byKey[label]`), and its 429s over the whole run.
import { perSecond } from '../src/accounts/account.js';
import { parseRateLimit } from '../src/setting-values.js';
import type { SimulatorStats } from '../src/simulator/index.js';
import { platesFrom, sleep } from './common.js';
import { startFleet } from './fleet.js';
import { startSimChildWithConfig } from './procs.js';
import type { StepContext } from './upstream.js';

export interface AccountPacingSpec {
  label: string;
  workers: number;
  /** `rateLimit` is both the simulator key's limit and the account's configured limit. */
  accounts: { id: string; rateLimit: string }[];
  warmupMs: number;
  windowMs: number;
  completionMs: [number, number];
}

export interface AccountPacing {
  id: string;
  rateLimit: string;
  limitPerS: number;
  /** Counted requests of the account's key per second in the window. */
  requestsPerS: number;
  /** requestsPerS ÷ limitPerS. */
  ofLimit: number;
  /** 429s over the whole run, and within the window. */
  rateLimited: number;
  rateLimitedInWindow: number;
  /** The key's largest count in any interval of the limit's duration, and the limit's count. */
  maxInWindow: number;
  limitMax: number;
  plates: number;
  /** Plates not yet created at the end of the window: above 0, the load was steady throughout. */
  backlogAtEnd: number;
}

export interface AccountPacingRun {
  workers: number;
  seconds: number;
  accounts: AccountPacing[];
  workerLog: Record<string, number>;
}

/** Plates enough to keep the account busy through warm-up and window: about 2.1 requests a plate. */
function backlogFor(rateLimit: string, spanMs: number): number {
  return Math.ceil((perSecond({ rateLimit: parseRateLimit(rateLimit)! }) * (spanMs + 15_000)) / 1000 / 1.6) + 50;
}

const keyFor = (id: string) => `bench-${id}-key-0123456789abcdef`;

export async function measureAccountPacing(ctx: StepContext, spec: AccountPacingSpec): Promise<AccountPacingRun> {
  const sim = await startSimChildWithConfig({
    keys: spec.accounts.map((a) => ({ key: keyFor(a.id), label: a.id, rateLimit: a.rateLimit })),
    window: 'sliding',
    completionMs: spec.completionMs,
    dailyQuota: 1_000_000_000,
  });
  try {
    const fleet = await startFleet(ctx, {
      label: spec.label,
      workers: spec.workers,
      upstreamUrl: sim.url,
      accounts: spec.accounts.map((a) => ({ id: a.id, key: keyFor(a.id), rateLimit: a.rateLimit })),
    });
    try {
      const batches = [];
      for (const a of spec.accounts) {
        const plates = backlogFor(a.rateLimit, spec.warmupMs + spec.windowMs);
        const from = ctx.allocatePlates(plates);
        batches.push({
          account: a,
          plates,
          batch: await fleet.vqb.enqueue(platesFrom(from, plates), { batchId: `${spec.label}-${a.id}`, account: a.id }),
        });
      }
      // The window opens once every key is running (the last first request + warm-up).
      const deadline = Date.now() + 30_000;
      let stats: SimulatorStats;
      for (;;) {
        stats = await sim.stats();
        const firsts = spec.accounts.map((a) => stats.byKey[a.id]?.firstAt ?? null);
        if (firsts.every((t) => t !== null)) {
          await sleep(Math.max(...(firsts as number[])) + spec.warmupMs - Date.now());
          break;
        }
        if (Date.now() > deadline) throw new Error(`${spec.label}: not every key sent a request within 30 s`);
        await sleep(25);
      }
      const snapshot = async () => {
        const before = Date.now();
        const s = await sim.stats();
        return { at: (before + Date.now()) / 2, stats: s };
      };
      const a = await snapshot();
      await sleep(spec.windowMs);
      const b = await snapshot();
      const seconds = (b.at - a.at) / 1000;
      const accounts: AccountPacing[] = [];
      for (const { account, plates, batch } of batches) {
        const before = a.stats.byKey[account.id];
        const after = b.stats.byKey[account.id];
        if (!before || !after) throw new Error(`${spec.label}: the simulator has no stats for key ${account.id}`);
        const limit = parseRateLimit(account.rateLimit)!;
        const limitPerS = perSecond({ rateLimit: limit });
        const requestsPerS = (after.counted - before.counted) / seconds;
        accounts.push({
          id: account.id,
          rateLimit: account.rateLimit,
          limitPerS,
          requestsPerS,
          ofLimit: requestsPerS / limitPerS,
          rateLimited: after.rateLimited,
          rateLimitedInWindow: after.rateLimited - before.rateLimited,
          maxInWindow: after.maxInWindow,
          limitMax: limit.max,
          plates,
          backlogAtEnd: (await batch.progress()).counts.queued,
        });
      }
      return { workers: spec.workers, seconds, accounts, workerLog: fleet.workerLog() };
    } finally {
      await fleet.stop();
    }
  } finally {
    await sim.stop();
  }
}
