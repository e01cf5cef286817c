import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, makePlates, startHarness } from '../helpers/engine.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('worker engine: the happy path', () => {
  it('creates every plate exactly once and stores one outcome per plate', async () => {
    h = await startHarness({ label: 'basic', config: { VQ_RATE_LIMIT: '200/s', VQ_CONCURRENCY: '16' } });
    const plates = makePlates(300);
    await h.enqueue('b1', plates);
    await h.waitForBatch('b1', 60_000);

    const stats = h.sim.stats({ plates: true });
    expect(stats.creates).toBe(300);
    expect(stats.maxCreatesPerPlate).toBe(1);
    expect(Object.keys(stats.createsByPlate ?? {}).sort()).toEqual([...plates].sort());
    const info = await h.services.batchViews.get('b1');
    expect(info.counts).toMatchObject({ enqueued: 300, done: 300, failed: 0, inflight: 0, creates: 300 });
    let outcomes = 0;
    for await (const o of h.services.outcomes.scan('b1')) {
      outcomes++;
      expect(o.status).toBe('done');
      expect(o.queryId).toMatch(/\S/);
      expect((o.result as { licensePlate?: string }).licensePlate).toBe(o.plate);
    }
    expect(outcomes).toBe(300);
    // Polls spent: at most a few per plate; the learner aims for ~1.
    expect(stats.gets / 300).toBeLessThan(3);
  });
});
