// `vqb work` processes share every account's limit through Redis: each account runs at its own
// rate at the same time as the others, from the same processes, and no plate is created twice.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { makePlates, refusalsNotFromStalls, useHarness } from '../helpers/engine.js';
import { harnessEnv, spawnVqb } from '../helpers/process.js';

const harness = useHarness();

// Its simulator shares this process with three or four workers, and the machine's two cores with
// other files: the pacing allowance is BUSY_HOST's (test/helpers/engine.ts) and more. A worker
// process descheduled past its slot by more than the allowance sends late, and a sliding window
// then holds one request too many: a 429 no stall of the simulator explains (one seen in a run of
// `npm test` with 150 ms). What the test shows holds at any allowance: no 429 of the pace's
// making, never more than the limit in a window, every plate once. At 400 ms the allowance still
// matters: with a pace that spaces N requests over the window alone (pacingIntervalMs without the
// allowance), both tests fail on a 429 no stall explains (checked at stop 62).
const SPAWNED_HOST_MS = 400;
const SPAWNED_HOST = { VQ_PACING_JITTER: `${SPAWNED_HOST_MS}ms` } as const;
const children: ChildProcess[] = [];

async function stopAll(): Promise<void> {
  for (const c of children) {
    if (c.exitCode !== null) continue;
    c.kill('SIGTERM');
    const [code] = (await once(c, 'exit')) as [number];
    expect(code).toBe(0);
  }
  children.length = 0;
}

describe('scale-out', () => {
  it('two accounts (10/s and 20/s, sliding windows) served by the same three processes: each within its own limit, no 429, every plate once', async () => {
    const h = await harness.start({
      label: 'scale',
      workers: 0,
      accounts: [
        { id: 'frota', rateLimit: '10/s', key: { rateLimit: '10/s' } },
        { id: 'seguros', rateLimit: '20/s', key: { rateLimit: '20/s' } },
      ],
      sim: { window: 'sliding', completionMs: [200, 600] },
    });
    await h.enqueue('a', makePlates(60), { account: 'frota' });
    await h.enqueue('b', makePlates(120, 1_000), { account: 'seguros' });
    try {
      for (let i = 0; i < 3; i++)
        children.push(
          spawnVqb(['work'], harnessEnv(h, { ...SPAWNED_HOST, VQ_CONCURRENCY: '4', VQ_POLL_INITIAL: '500ms' })).child,
        );
      await h.waitForBatch('a', 90_000);
      await h.waitForBatch('b', 90_000);
    } finally {
      await stopAll();
    }
    const stats = h.sim.stats({ plates: true, times: true });
    expect(stats.creates).toBe(180);
    expect(stats.maxCreatesPerPlate).toBe(1);
    expect(refusalsNotFromStalls(stats, SPAWNED_HOST_MS).unexplained).toEqual([]);
    for (const [account, limit] of [
      ['frota', 10],
      ['seguros', 20],
    ] as const)
      expect(stats.byKey[account]!.maxInWindow, account).toBeLessThanOrEqual(limit);
    expect((await h.services.batchViews.get('a')).counts).toMatchObject({ done: 60, failed: 0 });
    expect((await h.services.batchViews.get('b')).counts).toMatchObject({ done: 120, failed: 0 });
  }, 120_000);

  it('four processes on one account at 20/s (sliding window): no 429, never more than the limit in any second', async () => {
    const h = await harness.start({
      label: 'scale4',
      workers: 0,
      sim: { rateLimit: '20/s', window: 'sliding', completionMs: [200, 600] },
    });
    await h.enqueue('b', makePlates(200));
    try {
      for (let i = 0; i < 4; i++)
        children.push(
          spawnVqb(
            ['work'],
            harnessEnv(h, { ...SPAWNED_HOST, VQ_RATE_LIMIT: '20/s', VQ_CONCURRENCY: '4', VQ_POLL_INITIAL: '500ms' }),
          ).child,
        );
      await h.waitForBatch('b', 90_000);
    } finally {
      await stopAll();
    }
    const stats = h.sim.stats({ plates: true, times: true });
    expect(stats.creates).toBe(200);
    expect(stats.maxCreatesPerPlate).toBe(1);
    expect(refusalsNotFromStalls(stats, SPAWNED_HOST_MS).unexplained).toEqual([]);
    expect(stats.maxInWindow).toBeLessThanOrEqual(20);
  }, 120_000);
});
