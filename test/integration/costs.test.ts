// Cost controls: dry runs, spending caps, result reuse and the cost report, against real Redis
// and the simulator's own counters.
import { afterEach, describe, expect, it } from 'vitest';
import { estimateCost } from '../../src/producers/dry-run.js';
import { ingestList } from '../../src/producers/enqueue.js';
import { toInputRows } from '../../src/producers/list.js';
import { CostLedger } from '../../src/queue/costs.js';
import { releaseAccountHold, releaseBatchHold } from '../../src/queue/holds.js';
import { type Harness, makePlates, startHarness } from '../helpers/engine.js';
import { waitFor } from '../helpers/process.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** Nothing of the harness's first account is queued or running (what sleeps in `delayed` is held). */
async function settled(h: Harness): Promise<boolean> {
  const counts = await h.queue.getJobCounts('wait', 'prioritized', 'active');
  return Object.values(counts).every((n) => n === 0);
}

describe('cost controls', () => {
  it('a dry run calls nothing upstream and predicts the create count exactly', async () => {
    h = await startHarness({ label: 'dry', workers: 0 });
    const plates = [...makePlates(40), 'abc-1234', 'ABC1234', 'nope', ''];
    const { rows } = toInputRows(plates);
    const estimate = await estimateCost(h.services, 'dry', rows);
    expect(h.sim.stats().requests).toBe(0);
    expect(await h.services.batches.exists('dry')).toBe(false);
    expect(estimate).toMatchObject({ rows: 44, rejected: 2, duplicates: 1, plates: 41, creates: 41 });

    const { batch } = await ingestList(h.services, plates, { source: 'library', batchId: 'dry' });
    h.startWorker();
    await h.waitForBatch(batch.id);
    expect(h.sim.stats().creates).toBe(estimate.creates);
    // Run again: the finished batch would create nothing more.
    expect((await estimateCost(h.services, 'dry', rows)).creates).toBe(0);
  });

  it('a batch cap stops creates at exactly N, keeps every plate, and a raised cap finishes the batch', async () => {
    h = await startHarness({ label: 'cap', workers: 0 });
    // The account has met its upstream before: first contact (one create alone until its plate ends)
    // would let the feeder put every plate on the queue meanwhile, and none would wait in the scheduler.
    await h.services.answers.learn('default', { id: '/body/queryId', status: '/body/status' }, Date.now());
    await ingestList(h.services, makePlates(60), { source: 'library', batchId: 'capped', maxCreates: 25 });
    h.startWorker();
    // Settled: the batch is held and no job of it is queued or running (the rest sleep, held).
    await waitFor(async () => (await h!.services.batchViews.get('capped')).blocked === 'budget' && (await settled(h!)));
    let info = await h.services.batchViews.get('capped');
    expect(h.sim.stats().creates).toBe(25);
    expect(info.counts).toMatchObject({ creates: 25, done: 25, failed: 0 });
    expect(info.blocked).toBe('budget');
    expect(info.finishedAt).toBeUndefined();
    // Held plates are off the queue: the batch left the scheduler, so they use no pacing slot while they wait.
    expect((await h.services.scheduler.shares('default')).map((s) => s.batchId)).not.toContain('capped');
    expect(await h.services.scheduler.waiting(await h.services.batches.ref('capped'))).toBeGreaterThan(0);

    await h.services.budget.setMaxCreates(await h.services.batches.ref('capped'), 60);
    await releaseBatchHold(h.services, 'capped');
    await h.waitForBatch('capped');
    info = await h.services.batchViews.get('capped');
    expect(info.counts).toMatchObject({ creates: 60, done: 60, failed: 0 });
    expect(h.sim.stats({ plates: true }).maxCreatesPerPlate).toBe(1);
  });

  it('a daily cap holds creates (polls go on) until it is raised', async () => {
    h = await startHarness({ label: 'daycap', workers: 0, config: { VQ_MAX_CREATES_PER_DAY: '10' } });
    await ingestList(h.services, makePlates(30), { source: 'library', batchId: 'day' });
    h.startWorker();
    await waitFor(
      async () =>
        (await h!.line.state()).budgetReason === 'day' &&
        (await h!.services.batchViews.get('day')).counts.done >= 10 &&
        (await settled(h!)),
    );
    expect(h.sim.stats().creates).toBe(10);
    const line = await h.line.state();
    expect(line.budgetReason).toBe('day');
    expect(line.budgetUntil).toBeGreaterThan(Date.now());

    await h.services.budget.setCaps('default', { perDay: 100 });
    await releaseAccountHold(h.services, 'default');
    await h.waitForBatch('day');
    expect(h.sim.stats().creates).toBe(30);
  });

  it('inside the reuse window a second batch answers overlapping plates from stored results, free', async () => {
    h = await startHarness({ label: 'reuse' });
    const plates = makePlates(30);
    // Results are kept for reuse only when reuse is on: here the first batch asks for it.
    await ingestList(h.services, plates.slice(0, 20), {
      source: 'library',
      batchId: 'first',
      reuseWithinMs: 3_600_000,
    });
    await h.waitForBatch('first');
    await ingestList(h.services, plates.slice(10), { source: 'library', batchId: 'second', reuseWithinMs: 3_600_000 });
    await h.waitForBatch('second');
    const stats = h.sim.stats({ plates: true });
    expect(stats.creates).toBe(30); // 20 + only the 10 new plates
    const second = await h.services.batchViews.get('second');
    expect(second.counts).toMatchObject({ done: 20, reused: 10, creates: 10 });
    const reused = await h.services.outcomes.get(await h.services.batches.ref('second'), plates[12]!);
    expect(reused).toMatchObject({ status: 'done', reused: true, requests: 0 });
    expect(reused!.reusedAgeMs).toBeGreaterThanOrEqual(0);
    expect((reused!.result as { licensePlate: string }).licensePlate).toBe(plates[12]);
    // Without a window the same plates are paid again.
    await ingestList(h.services, plates.slice(0, 5), { source: 'library', batchId: 'third' });
    await h.waitForBatch('third');
    expect(h.sim.stats().creates).toBe(35);
    // With reuse off (no default window, no window of its own) a batch keeps a pointer per plate to
    // its own outcome: a later batch that asks for reuse finds them while that batch is kept...
    const fresh = makePlates(5, 100);
    await ingestList(h.services, fresh, { source: 'library', batchId: 'fourth' });
    await h.waitForBatch('fourth');
    await ingestList(h.services, fresh, { source: 'library', batchId: 'fifth', reuseWithinMs: 3_600_000 });
    await h.waitForBatch('fifth');
    expect((await h.services.batchViews.get('fifth')).counts).toMatchObject({ done: 5, reused: 5, creates: 0 });
    expect(h.sim.stats().creates).toBe(40); // the fourth's 5 only
    // ...and pays again once it is gone (deleted, or pruned by retention).
    const fourth = await h.services.batches.ref('fourth');
    await h.services.outcomes.forget(fourth);
    await h.services.batches.forget(fourth);
    await ingestList(h.services, fresh, { source: 'library', batchId: 'sixth', reuseWithinMs: 3_600_000 });
    await h.waitForBatch('sixth');
    expect((await h.services.batchViews.get('sixth')).counts).toMatchObject({ done: 5, reused: 0, creates: 5 });
  });

  it("the cost report equals the simulator's counters", async () => {
    h = await startHarness({
      label: 'report',
      sim: { rateLimit: '20/s', window: 'fixed', rateLimitHeaders: false },
      config: { VQ_RATE_LIMIT: '40/s' },
    });
    await ingestList(h.services, makePlates(40), { source: 'library', batchId: 'r' });
    await h.waitForBatch('r', 60_000);
    const stats = h.sim.stats();
    const info = await h.services.batchViews.get('r');
    expect(info.counts.creates).toBe(stats.creates);
    expect(info.counts.polls).toBe(stats.gets);
    expect(info.counts.rateLimited).toBe(stats.rateLimited);
    const accounts = h.config.accounts.map((a) => a.id);
    const [today] = await new CostLedger(h.services.redis, h.services.keys, () => accounts).days(1);
    expect(today!.counts).toMatchObject({ creates: stats.creates, polls: stats.gets, rateLimited: stats.rateLimited });
  });
});
