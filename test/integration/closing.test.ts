// A batch's closing creates (queue/feeder.ts #closing): once no more of its creates wait than the
// key sends in one answer time, its polls yield to creates in the worker's line, so its last
// creates are not left for the end, when only their polls would be left to send while their
// answers come (the key half idle for an answer time: 1-1.5 s of a 300-plate batch at 30/s).
import { describe, expect, it } from 'vitest';
import { makePlates, metUpstream, useHarness } from '../helpers/engine.js';

const harness = useHarness();

describe('closing creates', () => {
  it("a batch's last creates go before its polls: the polls left after its last create fill an answer time", async () => {
    const h = await harness.start({
      label: 'closing',
      workers: 0,
      config: { VQ_RATE_LIMIT: '20/s', VQ_CONCURRENCY: '8' },
      sim: { completionMs: [1_000, 1_500] },
    });
    // A deployment that met this upstream: its answers' shape, and 64 answer times of 1-1.5 s it
    // stated (the first poll at their 90 % point, 1.45 s: a closing of 29 creates at 20/s).
    await metUpstream(h, 1_000, 1_500);
    await h.enqueue('b', makePlates(120));
    h.startWorker();
    await h.waitForBatch('b', 60_000);
    const stats = h.sim.stats({ plates: true, times: true });
    expect(stats.creates).toBe(120);
    expect(stats.maxCreatesPerPlate).toBe(1);
    const times = Object.values(stats.timesByKey!)[0]!;
    const lastCreate = Math.max(...times.creates);
    const after = times.gets.filter((at) => at > lastCreate).length;
    const before = (from: number) => times.gets.filter((at) => at > from && at < lastCreate).length;
    const creates = [...times.creates].sort((a, b) => a - b);
    // Polls sent among the last 29 creates (with polls first: 31, and 28 after the last create).
    const among = before(creates[creates.length - 29]!);
    console.log(`closing: ${after} polls after the last create, ${among} among the last 29 creates`);
    expect(among).toBeLessThanOrEqual(8);
    expect(after).toBeGreaterThanOrEqual(40);
  }, 90_000);

  it('a batch closes only when the account has no more creates than an answer time: a 1-plate batch beside a large one does not', async () => {
    const h = await harness.start({ label: 'closing-beside', workers: 0, config: { VQ_RATE_LIMIT: '20/s' } });
    // Answers of 1-1.5 s, some read at their first poll (what makes the schedule learned, which a
    // batch needs to close): a batch closes with at most about 29 creates left at 20/s.
    await metUpstream(h, 1_000, 1_500);
    for (let i = 0; i < 8; i++) h.services.learner.observe(h.config.product, false, 1_450, 1_000 + i * 60);
    await h.services.learner.flush();
    const { feeder } = h.services;
    // The worker processes mark closing batches (workers/worker.ts); this process plays one.
    feeder.marksClosing = true;
    const queue = h.services.accounts.for('default').queue;
    await h.enqueue('alone', makePlates(5));
    expect(feeder.closingUntil('alone'), 'a batch alone: its 5 creates close it').toBeDefined();
    await queue.drain();

    await h.enqueue('large', makePlates(1_000, 100));
    await queue.drain();
    // The feed that picks the 1-plate batch's plate picks the large batch's beside it.
    await h.enqueue('one', makePlates(1, 5_000));
    expect(feeder.closingUntil('one'), 'beside 1,000 creates the key stays busy: no yield').toBeUndefined();
    expect(feeder.closingUntil('large')).toBeUndefined();
  });
});
