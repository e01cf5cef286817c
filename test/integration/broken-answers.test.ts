// Honest answers to broken responses: a create whose answer was not read whole may have been made
// and paid, so it is not refunded and is re-sent only flagged; every request that left counts as
// sent, so `vqb cost` matches the upstream's own count. Counted at the simulator: what it made
// and what it was sent, not only what vqb recorded.
import { describe, expect, it } from 'vitest';
import type { SimulatorOptions } from '../../src/simulator/options.js';
import { type Harness, makePlates, sleep, useHarness } from '../helpers/engine.js';

const harness = useHarness();
const PLATES = 40;

async function check(h: Harness, batchId: string): Promise<{ twice: number; flagged: number; failed: number }> {
  const stats = h.sim.stats({ plates: true });
  const info = await h.services.batchViews.get(batchId);
  let flagged = 0;
  let failed = 0;
  for (const plate of makePlates(PLATES)) {
    const outcome = await h.services.outcomes.get(await h.services.batches.ref(batchId), plate);
    expect(outcome, plate).toBeDefined();
    if (outcome?.status === 'failed') failed += 1;
    if (outcome?.possibleDuplicate) flagged += 1;
    // Every plate created twice says so.
    if ((stats.createsByPlate?.[plate] ?? 0) > 1)
      expect(outcome?.possibleDuplicate, `${plate} created twice, not flagged`).toBe(true);
  }
  // The cost figures match what the upstream was sent (it counted every create and poll that reached it).
  expect(info.counts.createsSent, 'creates sent = creates the simulator counted').toBe(stats.countedCreates);
  expect(info.counts.pollsSent, 'polls sent = polls the simulator counted').toBe(stats.countedGets);
  expect(info.counts.inflight).toBe(0);
  return { twice: stats.duplicateCreates, flagged, failed };
}

// Each fault falls on 30 % of the creates: 40 plates then miss it with a chance of 0.7^40 (1 in
// 1.6 million); at 15 % that was 1 in 670, and one CI run drew it (no fault, nothing to check).
const CASES: { name: string; sim: Partial<SimulatorOptions>; expectFlagged: boolean; failedCode?: string }[] = [
  {
    name: 'a 201 whose body is cut off by a connection reset',
    sim: { cutBodyAfterCreateRate: 0.3 },
    expectFlagged: true,
  },
  {
    name: 'a create the backend made, answered 502 with a gateway page',
    sim: { gatewayErrorAfterCreateRate: 0.3 },
    expectFlagged: true,
  },
  {
    name: 'a 201 whose body never comes (body timeout after the headers)',
    sim: { stallBodyAfterCreateRate: 0.3 },
    expectFlagged: true,
  },
  {
    name: 'a create answered after the request timeout',
    sim: { slowCreateRate: 0.3, slowCreateMs: 2_500 },
    expectFlagged: true,
  },
  {
    name: 'a 201 with truncated JSON (read whole, unusable): failed, not paid again',
    sim: { truncatedBodyAfterCreateRate: 0.3 },
    expectFlagged: false,
    failedCode: 'BAD_RESPONSE',
  },
];

describe('broken answers', () => {
  it.each(CASES)(
    '$name: every plate created twice is flagged; creates and polls sent equal the simulator’s counts',
    async ({ sim, expectFlagged, failedCode }) => {
      const h = await harness.start({
        label: 'broken',
        // 10 attempts: with a 30 % fault on every create, 6 left a plate failing all of them in
        // about 3 % of runs (0.3⁶ × 40 plates; seen once in the suite), 10 in 0.0002 %.
        config: { VQ_REQUEST_TIMEOUT: '1s', VQ_BACKOFF: '50ms', VQ_ATTEMPTS: '10' },
        sim: { completionMs: [100, 300], ...sim },
      });
      await h.enqueue('b', makePlates(PLATES));
      await h.waitForBatch('b', 60_000);
      await sleep(300);
      const { twice, flagged, failed } = await check(h, 'b');
      const faults = Object.values(h.sim.stats().faults).reduce((a, b) => a + b, 0);
      expect(faults).toBeGreaterThan(0);
      if (expectFlagged) {
        expect(twice).toBeGreaterThan(0);
        expect(flagged).toBeGreaterThanOrEqual(twice);
        expect(failed).toBe(0);
      } else {
        expect(twice).toBe(0);
        expect(failed).toBe(faults);
        for (const plate of makePlates(PLATES)) {
          const o = await h.services.outcomes.get(await h.services.batches.ref('b'), plate);
          if (o?.status === 'failed') expect(o.error?.code).toBe(failedCode);
        }
      }
    },
  );

  it('a poll answered 404 QUERY_NOT_FOUND once is retried: no plate fails, nothing is created twice', async () => {
    const h = await harness.start({
      label: 'poll404',
      config: { VQ_BACKOFF: '50ms' },
      sim: { completionMs: [100, 300], pollNotFoundOnceRate: 0.5 },
    });
    await h.enqueue('p', makePlates(PLATES));
    await h.waitForBatch('p', 60_000);
    const stats = h.sim.stats();
    expect(stats.faults.pollsNotFound).toBeGreaterThan(5);
    const info = await h.services.batchViews.get('p');
    expect(info.counts).toMatchObject({ done: PLATES, failed: 0 });
    expect(stats.duplicateCreates).toBe(0);
    expect(info.counts.pollsSent).toBe(stats.countedGets);
  });

  it('429s with Retry-After as an HTTP date are honoured: every plate once, the sent counts match', async () => {
    const h = await harness.start({
      label: 'retry-date',
      config: { VQ_RATE_LIMIT: '12/s' },
      sim: {
        completionMs: [100, 300],
        rateLimit: '6/s',
        window: 'fixed',
        retryAfterFormat: 'date',
        rateLimitHeaders: false,
      },
    });
    await h.enqueue('r', makePlates(PLATES));
    await h.waitForBatch('r', 60_000);
    const stats = h.sim.stats();
    expect(stats.rateLimited).toBeGreaterThan(0);
    expect(stats.duplicateCreates).toBe(0);
    const info = await h.services.batchViews.get('r');
    expect(info.counts).toMatchObject({ done: PLATES, failed: 0 });
    expect(info.counts.createsSent).toBe(stats.countedCreates);
    expect(info.counts.pollsSent).toBe(stats.countedGets);
  });
});
