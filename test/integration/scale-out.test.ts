// Three `vqb work` processes on one queue share the global limit and never double-create.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { makePlates, startHarness, type Harness } from '../helpers/engine.js';
import { harnessEnv, spawnVqb } from '../helpers/process.js';

let h: Harness | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  children.length = 0;
  await h?.close();
  h = undefined;
});

describe('scale-out', () => {
  it('three worker processes: every plate done exactly once, the combined rate within the limit, no 429', async () => {
    h = await startHarness({ label: 'scale', workers: 0, sim: { rateLimit: '30/s', window: 'sliding', completionMs: [200, 600] } });
    await h.enqueue('b', makePlates(150));
    // The same limit as the simulator's. The margin is wider than the default 2 %: three worker
    // processes, the simulator and the test share two cores here, and a process that stalls 20 ms
    // between the limiter's admission and sending its request squeezes 31 requests into one second.
    for (let i = 0; i < 3; i++) {
      children.push(spawnVqb(['work'], harnessEnv(h, { VQ_RATE_LIMIT: '30/s', VQ_PACING_MARGIN: '0.1', VQ_CONCURRENCY: '4', VQ_POLL_INITIAL: '500ms' })).child);
    }
    await h.waitForBatch('b', 90_000);
    const stats = h.sim.stats({ plates: true });
    expect(stats.creates).toBe(150);
    expect(stats.maxCreatesPerPlate).toBe(1);
    expect(stats.rateLimited).toBe(0);
    expect(stats.maxInWindow).toBeLessThanOrEqual(30);
    expect((await h.services.batches.get('b')).counts).toMatchObject({ done: 150, failed: 0 });
    for (const c of children) {
      c.kill('SIGTERM');
      const [code] = (await once(c, 'exit')) as [number];
      expect(code).toBe(0);
    }
  }, 120_000);
});
