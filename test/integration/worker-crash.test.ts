// A worker process killed with SIGKILL mid-batch and started again: every plate completes and no
// plate whose queryId had been stored is created again.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, makePlates, sleep, startHarness } from '../helpers/engine.js';
import { harnessEnv, spawnVqb } from '../helpers/process.js';

let h: Harness | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  children.length = 0;
  await h?.close();
  h = undefined;
});

function spawnWorker(h: Harness, args: string[] = []): ChildProcess {
  const { child } = spawnVqb(['work', ...args], harnessEnv(h, { VQ_CONCURRENCY: '8' }));
  children.push(child);
  return child;
}

describe('worker engine: crashes', () => {
  it('SIGKILL mid-batch, restart: all complete, and no query whose id was stored is created again', async () => {
    h = await startHarness({ label: 'crash', workers: 0, sim: { completionMs: [300, 800] } });
    const plates = makePlates(300);
    await h.enqueue('b', plates);
    const first = spawnWorker(h);
    // Wait until the pipeline is full of stored queryIds, then kill without warning.
    for (let i = 0; i < 200 && (await h.services.batchViews.get('b')).counts.done < 60; i++) await sleep(50);
    const stored = new Map<string, string>();
    for (const job of await h.queue.getJobs(['delayed', 'active', 'prioritized', 'wait'])) {
      if (job?.data.queryId) stored.set(job.data.plate, job.data.queryId);
    }
    first.kill('SIGKILL');
    await once(first, 'exit');
    const before = await h.services.batchViews.get('b');
    expect(before.finishedAt).toBeUndefined();
    expect(stored.size).toBeGreaterThan(0);

    spawnWorker(h);
    await h.waitForBatch('b', 90_000);
    const stats = h.sim.stats({ plates: true });
    for (const [plate, queryId] of stored) {
      expect(stats.createsByPlate?.[plate], plate).toBe(1);
      expect((await h.services.outcomes.get(await h.services.batches.ref('b'), plate))?.queryId).toBe(queryId);
    }
    const info = await h.services.batchViews.get('b');
    expect(info.counts.done).toBe(300);
    // Only a create cut off between request and stored answer may repeat, and it is flagged (the
    // flag says "possible": a create killed before it left is flagged too, so flags ⊇ repeats).
    const repeated = Object.entries(stats.createsByPlate ?? {})
      .filter(([, n]) => n > 1)
      .map(([p]) => p);
    for (const plate of repeated)
      expect((await h.services.outcomes.get(await h.services.batches.ref('b'), plate))?.possibleDuplicate, plate).toBe(
        true,
      );
    expect(repeated.length).toBeLessThanOrEqual(info.counts.possibleDuplicates);
  }, 120_000);

  it('SIGTERM: the worker stops taking jobs, finishes what it runs, and exits promptly', async () => {
    h = await startHarness({ label: 'sigterm', workers: 0, sim: { completionMs: [300, 800], latencyMs: [100, 200] } });
    await h.enqueue('b', makePlates(200));
    // Promptly is the worker's own deadline: running jobs not finished within --shutdown-timeout
    // make it exit 1 (their jobs are taken again); 0 says it finished them inside it.
    const child = spawnWorker(h, ['--shutdown-timeout', '10s']);
    for (let i = 0; i < 200 && (await h.services.batchViews.get('b')).counts.done < 20; i++) await sleep(50);
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
    // Nothing is left active with a lock held: a restarted worker finishes the batch at once.
    expect(await h.queue.getActiveCount()).toBe(0);
    spawnWorker(h);
    await h.waitForBatch('b', 60_000);
    expect(h.sim.stats({ plates: true }).maxCreatesPerPlate).toBe(1);
  }, 120_000);
});
