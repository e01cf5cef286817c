// Fair, multi-account scheduling on one account: batches share its rate by weight from the moment
// each arrives, and an interactive look-up goes before anything queued.
import { describe, expect, it } from 'vitest';
import { ingestList } from '../../src/producers/enqueue.js';
import { PRIORITY } from '../../src/queue/account-queues.js';
import type { Outcome } from '../../src/queue/types.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { waitFor } from '../helpers/process.js';

const harness = useHarness();

async function outcomes(h: Harness, batchId: string): Promise<Outcome[]> {
  const out: Outcome[] = [];
  for await (const o of h.services.outcomes.scan(await h.services.batches.ref(batchId))) out.push(o);
  return out;
}

/**
 * A's share of the creates made while both batches had creates waiting (from B's first create to
 * the earlier of the two last creates), counted in the order the creates were made: an order, not
 * a rate, so a loaded machine slows it without moving it. The rule itself, pick by pick on a
 * virtual clock, is pick-order.test.ts's.
 */
async function shareOfA(h: Harness, a: string, b: string): Promise<number> {
  const times = async (id: string) => (await outcomes(h, id)).map((o) => o.createdAt!).sort((x, y) => x - y);
  const [ta, tb] = [await times(a), await times(b)];
  const from = tb[0]!;
  const to = Math.min(ta.at(-1)!, tb.at(-1)!);
  const within = (t: number[]) => t.filter((x) => x >= from && x <= to).length;
  return within(ta) / (within(ta) + within(tb));
}

describe('fair shares between the batches of one account', () => {
  it.each([
    [1, 1, 0.5],
    [3, 1, 0.75],
  ])(
    'weights %i:%i: while both have creates waiting, the first gets %f of the creates (± 0.15), each plate created once',
    async (wa, wb, expected) => {
      const h = await harness.start({
        label: `share-${wa}-${wb}`,
        config: { VQ_RATE_LIMIT: '50/s', VQ_CONCURRENCY: '16' },
        sim: { completionMs: [100, 200] },
      });
      await h.enqueue('first', makePlates(150), { weight: wa });
      // The second arrives while the first is well under way.
      await waitFor(async () => (await h.services.batchViews.get('first')).counts.creates >= 30);
      await h.enqueue('second', makePlates(150, 1_000), { weight: wb });
      await h.waitForBatch('first', 60_000);
      await h.waitForBatch('second', 60_000);
      // The second did not wait behind the first: it shared from its arrival, by weight. The
      // creates the first had on the queue when the second came (the feed keeps some waiting) and
      // the order in which 16 requests a time reach the upstream blur it (0.38 read with 90
      // plates a batch, five test files at once); the split pick by pick is pick-order's.
      const share = await shareOfA(h, 'first', 'second');
      expect(share).toBeGreaterThan(expected - 0.15);
      expect(share).toBeLessThan(expected + 0.15);
      const stats = h.sim.stats({ plates: true });
      expect(stats.maxCreatesPerPlate).toBe(1);
      expect(stats.rateLimited).toBe(0);
    },
  );
});

describe('priority classes', () => {
  it('an interactive plate submitted behind a large normal batch is created before the queued plates, and polled on the interactive schedule', async () => {
    // The first poll of a normal plate waits for what the schedule learned (20 s here before
    // anything is learned); an interactive plate is polled every second, so it is stored soon after
    // it finishes: a margin no busy machine closes.
    const h = await harness.start({
      label: 'interactive',
      // Not learned: the fleet's first polls stay at 20 s whatever its answers take.
      config: { VQ_RATE_LIMIT: '20/s', VQ_POLL_INITIAL: '20s', VQ_POLL_ADAPTIVE: 'false' },
      sim: { completionMs: [800, 1_000] },
    });
    await h.enqueue('fleet', makePlates(400));
    await waitFor(async () => (await h.services.batchViews.get('fleet')).counts.creates >= 40);
    const submitted = Date.now();
    const { batch } = await ingestList(h.services, ['XYZ1A23'], {
      source: 'library',
      priority: 'interactive',
      name: 'screen',
    });
    await h.waitForBatch(batch.id, 30_000);
    // The fleet still had hundreds of plates to create: the interactive plate did not merely run after it.
    expect((await h.services.batchViews.get('fleet')).counts.queued).toBeGreaterThan(200);
    const [outcome] = await outcomes(h, batch.id);
    const fleetCreatedAt = (await outcomes(h, 'fleet')).map((o) => o.createdAt!);
    // Created at once: no more than a few fleet plates went out between its submission and its
    // create (slots already reserved, and those taken while its job was fetched: 0-3 read quiet,
    // 4 in a CI run with five files at once), although hundreds were queued.
    const before = fleetCreatedAt.filter((t) => t > submitted && t < outcome!.createdAt!).length;
    expect(before).toBeLessThanOrEqual(10);
    // Polled every VQ_POLL_INTERACTIVE (1 s), not at the first-poll delay every other plate waits
    // for (20 s here): between its submission and its result the upstream saw its polls and no
    // other, though the fleet's plates created before it were waiting for theirs. An order of
    // events, not a latency (that is a bench figure).
    expect(outcome!.polls).toBeGreaterThanOrEqual(1);
    const polls = Object.values(h.sim.stats({ times: true }).timesByKey ?? {}).flatMap((t) => t.gets);
    expect(polls.filter((at) => at > submitted && at <= outcome!.finishedAt)).toHaveLength(outcome!.polls!);
  });

  it('bulk waits for normal batches of its account; an interactive batch over VQ_INTERACTIVE_MAX is refused with a typed error', async () => {
    const h = await harness.start({ label: 'bulk', config: { VQ_RATE_LIMIT: '100/s', VQ_INTERACTIVE_MAX: '5' } });
    await h.enqueue('bulk', makePlates(200), { priority: 'bulk' });
    await waitFor(async () => (await h.services.batchViews.get('bulk')).counts.creates >= 20);
    await h.enqueue('normal', makePlates(100, 1_000));
    await h.waitForBatch('normal', 60_000);
    const normalLast = Math.max(...(await outcomes(h, 'normal')).map((o) => o.createdAt!));
    const normalFirst = Math.min(...(await outcomes(h, 'normal')).map((o) => o.createdAt!));
    const bulkDuring = (await outcomes(h, 'bulk')).filter(
      (o) => o.createdAt! > normalFirst && o.createdAt! < normalLast,
    ).length;
    // Only bulk creates already on the queue when the normal batch came went out meanwhile.
    expect(bulkDuring).toBeLessThanOrEqual(h.services.feeder.target(h.config.accounts[0]!));
    await h.waitForBatch('bulk', 60_000);

    await expect(
      ingestList(h.services, makePlates(6, 5_000), { source: 'library', priority: 'interactive' }),
    ).rejects.toMatchObject({ code: 'TOO_MANY_FOR_INTERACTIVE' });
  });
});

describe('the feeder', () => {
  it("a normal batch's first plate goes on the queue as it is submitted, full or not, before the creates queued", async () => {
    const h = await harness.start({ label: 'fresh', workers: 0, config: { VQ_RATE_LIMIT: '20/s' } });
    const queue = h.services.accounts.for('default').queue;
    const target = h.services.feeder.target(h.line.account);
    // The upstream met (first contact feeds one plate at a time).
    await h.services.answers.learn('default', { id: '/body/queryId', status: '/body/status' }, Date.now());
    await ingestList(h.services, makePlates(1_000), { source: 'library', batchId: 'large' });
    // Its producer's feed filled the queue: the jobs it holds waiting stand for polls come due
    // too, which fill it as they come (a feed adds nothing then).
    expect(await queue.getPrioritizedCount()).toBe(target);
    expect((await h.services.feeder.feed('default')).fed).toBe(0);
    await ingestList(h.services, makePlates(3, 5_000), { source: 'library', batchId: 'small' });
    const jobs = await queue.getJobs(['prioritized']);
    const small = jobs.filter((j) => j.data.batchId === 'small');
    // One plate of it, beyond the target, at a poll's priority: it is fetched before the large
    // batch's creates queued, as polls are. Its others wait for their share.
    expect(small.map((j) => j.priority)).toEqual([PRIORITY.poll]);
    // The large batch's own first plate went so too, at its submit; its others at a create's.
    const large = jobs.filter((j) => j.data.batchId === 'large').map((j) => j.priority);
    expect(large.filter((p) => p === PRIORITY.poll)).toHaveLength(1);
    expect(large.filter((p) => p === PRIORITY.normal)).toHaveLength(target - 1);
    expect(jobs).toHaveLength(target + 1);
    // BullMQ's order: after that one plate, before every create queued.
    const ordered = await queue.getJobs(['prioritized'], 0, -1, true);
    expect(ordered.map((j) => j.data.batchId).indexOf('small')).toBe(1);
  });

  it('plates picked by a feeder that died before adding their jobs are added by another, and created once', async () => {
    const h = await harness.start({ label: 'staged', workers: 0, config: { VQ_RATE_LIMIT: '10/s' } });
    const { batch } = await ingestList(h.services, makePlates(30), { source: 'library', batchId: 'staged' });
    // What a feeder that died between picking and adding left: its plates picked (staged), no jobs.
    const picked = await h.services.scheduler.pick('default', 10, Date.now() - 60_000);
    expect(picked).toHaveLength(10);
    expect(await h.services.feeder.recover('default')).toBe(10);
    h.startWorker();
    await h.waitForBatch(batch.id, 30_000);
    expect((await h.services.batchViews.get(batch.id)).counts).toMatchObject({ done: 30, failed: 0 });
    const stats = h.sim.stats({ plates: true });
    expect(stats.creates).toBe(30);
    expect(stats.maxCreatesPerPlate).toBe(1);
  });
});
