// Batches across workers: exact counts, retries that do not pay again unless asked, the demo.
import { describe, expect, it } from 'vitest';
import { ingestList } from '../../src/producers/enqueue.js';
import { rerunFailed as retryFailed } from '../../src/queue/rerun.js';
import { makePlates, useHarness } from '../helpers/engine.js';

const harness = useHarness();

describe('batches', () => {
  it('counts stay exact with three workers racing over two batches', async () => {
    const h = await harness.start({
      label: 'counts',
      workers: 3,
      sim: { failRate: 0.1 },
      config: { VQ_RATE_LIMIT: '300/s' },
    });
    const plates = makePlates(400);
    await Promise.all([
      h.enqueue('b1', plates.slice(0, 250)),
      h.enqueue('b2', [...plates.slice(200), ...plates.slice(200, 230)]),
    ]);
    await Promise.all([h.waitForBatch('b1'), h.waitForBatch('b2')]);
    const b1 = await h.services.batchViews.get('b1');
    const b2 = await h.services.batchViews.get('b2');
    expect(b1.counts.done + b1.counts.failed).toBe(250);
    expect(b2.counts).toMatchObject({ total: 230, enqueued: 200, duplicates: 30, inflight: 0, queued: 0 });
    expect(b2.counts.done + b2.counts.failed).toBe(200);
    let stored = 0;
    let failed = 0;
    for await (const o of h.services.outcomes.scan(await h.services.batches.ref('b1'))) {
      stored++;
      if (o.status === 'failed') failed++;
    }
    expect(stored).toBe(250);
    expect(failed).toBe(b1.counts.failed);
    // The same plate in two batches is two jobs and two creates; within a batch, one.
    expect(h.sim.stats().creates).toBe(450);
    expect(await h.services.inflight.count('default')).toBe(0);
  });

  it('the same content ingested twice at once is stored once (one ingest per batch across processes)', async () => {
    const h = await harness.start({ label: 'race', workers: 0 });
    const plates = makePlates(3_000);
    const [a, b] = await Promise.all([
      ingestList(h.services, plates, { source: 'api' }),
      ingestList(h.services, plates, { source: 'api' }),
    ]);
    expect(a.batch.id).toBe(b.batch.id);
    const info = await h.services.batchViews.get(a.batch.id);
    expect(info.counts).toMatchObject({ total: 3_000, enqueued: 3_000 });
    expect(await h.services.redis.llen(h.services.keys.rows(a.batch))).toBe(3_000);
    // Each plate waits once to be fed: the feeder keeps only a few seconds of the rate as jobs (and
    // one while the account meets its upstream, as this new one does: first contact).
    expect(await h.services.scheduler.waiting(await h.services.batches.ref(a.batch.id))).toBe(
      3_000 - (await h.queue.count()),
    );
    expect(await h.queue.count()).toBe(1);
  });

  it('retry polls the paid query again; only --recreate pays for a new one', async () => {
    const plates = makePlates(20);
    const h = await harness.start({ label: 'retry', sim: { failPlates: [plates[3]!, plates[7]!] } });
    await h.enqueue('b', plates);
    await h.waitForBatch('b');
    expect((await h.services.batchViews.get('b')).counts).toMatchObject({ done: 18, failed: 2 });

    const polled = await retryFailed(h.services, 'b');
    expect(polled).toEqual({ retried: 2, recreated: 0, skipped: 0 });
    await h.waitForBatch('b');
    expect(h.sim.stats().creates).toBe(20); // the same (failed) queries were polled, not re-created
    expect((await h.services.batchViews.get('b')).counts).toMatchObject({ done: 18, failed: 2 });

    h.sim.update({ failPlates: [] });
    const recreated = await retryFailed(h.services, 'b', { recreate: true });
    expect(recreated).toEqual({ retried: 2, recreated: 2, skipped: 0 });
    await h.waitForBatch('b');
    expect(h.sim.stats().creates).toBe(22);
    expect((await h.services.batchViews.get('b')).counts).toMatchObject({ done: 20, failed: 0 });
  });
});
