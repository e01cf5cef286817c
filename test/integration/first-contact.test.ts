// First contact on a cold deployment (issue 43): an account that has not had one plate read end to
// end sends one create at a time, and that must cost one answer time, not the slow end of the
// answers (VQ_POLL_INITIAL), nor a queue of refused jobs going round while it waits. The feeder puts
// one plate on the account's queue (interactive or not); the plate in flight is polled early and
// often; its answer ends first contact and seeds the poll schedule. Order and counts, no rates.
import { describe, expect, it, vi } from 'vitest';
import { ingestList } from '../../src/producers/enqueue.js';
import { upstreamOf } from '../../src/queue/answers.js';
import { connectRedis } from '../../src/redis/connection.js';
import { feedAfterFirstContact } from '../../workers/first-contact.js';
import { FEED_EVERY_MS } from '../../workers/housekeeping.js';
import { makePlates, sleep, useHarness } from '../helpers/engine.js';
import { ManualClock, runningClock } from '../helpers/manual-clock.js';
import { waitFor } from '../helpers/process.js';

const harness = useHarness();

describe('first contact', () => {
  it('feeds one plate while the account meets its upstream, interactive ones too; the rest once it is met', async () => {
    const h = await harness.start({ label: 'contact-feed', workers: 0 });
    await h.enqueue('bulk', makePlates(30));
    await h.enqueue('screen', makePlates(5, 100), { priority: 'interactive' });
    const account = h.config.accounts[0]!;
    const queued = async () => {
      const counts = await h.queue.getJobCounts('wait', 'prioritized', 'delayed', 'active');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    };
    // However often it is fed, one job waits: the others would only be refused by the in-flight cap
    // of 1 and go round the queue (2,000 Redis commands a second for 15 s on a cold start).
    for (let i = 0; i < 3; i++) await h.services.feeder.feed(account.id);
    expect(await queued()).toBe(1);
    // Another process (or account of the same upstream) read a plate end to end: the feed tops up.
    await h.services.answers.learn(account.id, {}, Date.now(), upstreamOf(account));
    await h.services.feeder.feed(account.id);
    expect(await queued()).toBeGreaterThan(5);
  });

  it("one account's answer read ends first contact for the busy accounts of its upstream: each is fed then, the idle one is not", async () => {
    // Three accounts of one upstream (the simulator), nothing read yet: each fed one plate.
    const h = await harness.start({
      label: 'contact-upstream',
      workers: 0,
      accounts: [{ id: 'fast' }, { id: 'slow' }, { id: 'idle' }],
    });
    await h.enqueue('f', makePlates(20), { account: 'fast' });
    await h.enqueue('s', makePlates(20, 100), { account: 'slow' });
    const queued = async (account: string) => {
      const counts = await h.services.accounts.queue(account).getJobCounts('wait', 'prioritized', 'delayed', 'active');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    };
    for (const id of ['fast', 'slow']) await h.services.feeder.feed(id);
    expect([await queued('fast'), await queued('slow')]).toEqual([1, 1]);
    // fast's first plate is read end to end (FirstContact.understood stores it for the upstream).
    const fast = h.config.accounts.find((a) => a.id === 'fast')!;
    await h.services.answers.learn('fast', {}, Date.now(), upstreamOf(fast));
    const errors: unknown[] = [];
    const fed = await feedAfterFirstContact(h.services, 'fast', (err) => errors.push(err));
    // slow is fed now, not when its feed pass's rest while meeting ends (up to 5 s); idle has nothing.
    expect(fed).toEqual(['fast', 'slow']);
    expect(errors).toEqual([]);
    expect(await queued('fast')).toBeGreaterThan(5);
    expect(await queued('slow')).toBeGreaterThan(5);
  });

  it("a read of 'still meeting' that lands after another account's answer was read does not hide it for a second", async () => {
    // A feed pass asked whether `late` still meets the upstream just before `quick`'s answer was
    // read: its Redis read landed after learn() had cleared what this process remembered, and was
    // remembered for MEETING_READ_MS. The feed that learn's caller then made for `late` read that,
    // fed nothing and woke nothing, and the feed pass rested `late` for 5 s (a cold gate's two
    // accounts: 0.897 of the limit, `late` idle from its first second to its fifth).
    const h = await harness.start({
      label: 'contact-stale-read',
      workers: 0,
      accounts: [{ id: 'quick' }, { id: 'late' }],
    });
    const [quick, late] = h.config.accounts;
    const book = h.services.answers;
    const asked = book.meeting(late!, Date.now());
    const read = book.learn('quick', {}, Date.now(), upstreamOf(quick!));
    // The read sent first still says what Redis held when it was sent.
    expect(await asked).toBe(true);
    await read;
    expect(await book.meeting(late!, Date.now())).toBe(false);
  });

  it("a wake heard while the feed pass's feed was out ends first contact's rest: the next pass feeds", async () => {
    // The worker on a clock the test owns. Its first feed pass asks for `late`'s plates while it
    // meets the upstream (its one plate waiting): nothing fed. While that feed is out, `quick`'s
    // answer is read (learn, then feedAfterFirstContact: `late` fed, and a wake published), and the
    // wake reaches the worker before the feed's answer does. That answer, "meeting, nothing fed",
    // is older than the wake: it must not rest `late` for MEETING_REST_MS (5 s), during which no
    // pass would feed `late` once the wake's plates are taken.
    const h = await harness.start({
      label: 'contact-wake-race',
      workers: 0,
      accounts: [{ id: 'quick' }, { id: 'late' }],
    });
    const [quick] = h.config.accounts;
    // The wake channel, heard here as the worker hears it.
    const listener = connectRedis(h.config.redis, { name: 'vqb-test-wakes' });
    const heard: string[] = [];
    listener.on('message', (_channel: string, accountId: string) => heard.push(accountId));
    await listener.subscribe(h.services.keys.wake);
    const clock = new ManualClock(Date.now());
    const worker = h.startWorker({ clock });
    await h.enqueue('l', makePlates(12), { account: 'late' });
    const feeder = worker.services.feeder;
    const feed = feeder.feed.bind(feeder);
    let answered = false;
    const fedLate: number[] = [];
    vi.spyOn(feeder, 'feed').mockImplementation(async (accountId, rate) => {
      const result = await feed(accountId, rate);
      if (accountId !== 'late') return result;
      fedLate.push(clock.now());
      if (answered || !result.meeting || result.fed > 0) return result;
      await h.services.answers.learn('quick', {}, clock.now(), upstreamOf(quick!));
      expect(await feedAfterFirstContact(h.services, 'quick', () => undefined)).toEqual(['quick', 'late']);
      await waitFor(async () => heard.includes('late'), 10_000, 'the wake published');
      // The worker's own subscriber hears it at the same time (a margin, not a measure).
      await sleep(200);
      answered = true;
      return result;
    });
    await waitFor(
      async () => {
        clock.advance(FEED_EVERY_MS);
        return answered;
      },
      20_000,
      'a feed of late answered "meeting"',
    );
    const answeredAt = clock.now();
    // The next passes feed `late` again: the stale answer set no rest.
    for (let i = 0; i < 3 && fedLate.every((at) => at <= answeredAt); i++) {
      clock.advance(FEED_EVERY_MS);
      await sleep(50);
    }
    expect(fedLate.filter((at) => at > answeredAt).length).toBeGreaterThanOrEqual(1);
    listener.disconnect();
    await runningClock(clock, worker.close());
  });

  it('costs one answer time: the plate in flight is polled early, and its answer starts the poll schedule', async () => {
    const h = await harness.start({
      label: 'contact-cold',
      sim: { completionMs: [2_500, 3_000], rateLimit: '50/s' },
      // The defaults' slow end: a first poll at 15 s, learned from there.
      config: { VQ_POLL_INITIAL: '15s', VQ_CONCURRENCY: '20' },
    });
    await ingestList(h.services, makePlates(40), { source: 'library', batchId: 'cold' });
    await h.waitForBatch('cold', 60_000);
    const stats = h.sim.stats({ times: true });
    expect(stats.creates).toBe(40);
    const times = Object.values(stats.timesByKey ?? {})[0]!;
    const creates = [...times.creates].sort((a, b) => a - b);
    const gets = [...times.gets].sort((a, b) => a - b);
    // One create alone until its answer was read (at least the fastest answer later), and polled
    // before its answer was there: found pending at least once before the second create went
    // out. The 15 s prior would have polled it once, at 15 s, and found it done. (An order of
    // events: the first early poll goes 250 ms after the create, and only a stall of over 2 s
    // would carry it past answers of 2.5-3 s.)
    expect(creates[1]! - creates[0]!).toBeGreaterThanOrEqual(2_500);
    expect(gets.filter((at) => at < creates[1]!).length).toBeGreaterThanOrEqual(2);
    // The schedule starts at the answers' time (stated by the upstream: twice it), not at 15 s.
    expect(await h.workers[0]!.learner.firstPollDelay(h.config.product)).toBeLessThan(h.config.poll.initialMs);
  }, 90_000);

  /**
   * A cold deployment (the 15 s prior) sends 250 plates at 50/s against answers of `completionMs`:
   * the polls after first contact (its second create) and before the batch's last create, an order
   * of events, each plate created once.
   */
  async function pollsAmongCreates(label: string, completionMs: [number, number]): Promise<number> {
    const h = await harness.start({
      label,
      sim: { completionMs, rateLimit: '50/s' },
      config: { VQ_POLL_INITIAL: '15s', VQ_CONCURRENCY: '20' },
    });
    await ingestList(h.services, makePlates(250), { source: 'library', batchId: label });
    await h.waitForBatch(label, 90_000);
    const stats = h.sim.stats({ plates: true, times: true });
    expect(stats.creates).toBe(250);
    expect(stats.maxCreatesPerPlate).toBe(1);
    const times = Object.values(stats.timesByKey ?? {})[0]!;
    const creates = [...times.creates].sort((a, b) => a - b);
    const lastCreate = creates[creates.length - 1]!;
    return times.gets.filter((at) => at > creates[1]! && at < lastCreate).length;
  }

  it('its answer time is in the schedule before the batch is fed: polls go among the creates, not held behind them by the 15 s prior', async () => {
    // The feed made when first contact ends reads the answer time to mark a batch's last creates
    // (queue/feeder.ts #closing: no more waiting than the key sends in one answer time). Seeded
    // after that feed, it read the 15 s prior: 50/s × 15 s covers the whole batch, which was
    // marked closing at once, and every poll waited behind every create (a cold 300-plate batch
    // at 30/s: no poll for 10 s, 270 paid queries unread). Seeded first (twice the first answer's
    // 0.5-0.8 s), only the last 50-80 creates close: 134 and 150 polls among the creates in two
    // runs; with the prior in force, none.
    expect(await pollsAmongCreates('contact-seed-first', [500, 800])).toBeGreaterThanOrEqual(60);
  }, 120_000);

  it('a batch closes on an answer time its polls taught, not on the seed: after a slow first answer its polls still go among its creates', async () => {
    // Seeded with twice a first answer of 1.4-1.6 s (3 s), the closing creates weighed 50/s × 3 s:
    // the last 150 of 250 plates, marked when a hundred were created, before any poll was due.
    // Their polls then yielded to every create, and nothing taught the schedule that answers take
    // half the seed: every plate was paid before one result was read (a cold 300-plate batch at
    // 30/s whose first answer took 2.6 s: 293 paid, unread). Now 35-153 in five runs; before, 0.
    expect(await pollsAmongCreates('contact-seed-slow', [1_400, 1_600])).toBeGreaterThanOrEqual(20);
  }, 120_000);
});
