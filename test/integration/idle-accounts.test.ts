// Idle accounts cost nothing (issue 21): a worker process runs a BullMQ Worker, and feeds, only
// for accounts with work (the scheduler's active set). Before, every configured account had a
// Worker (a blocking connection each) and was fed every 200 ms: 20 idle accounts cost ~700 Redis
// commands/s and 22+ connections per process.
import { afterEach, describe, expect, it } from 'vitest';
import { jobIdFor } from '../../src/queue/account-queues.js';
import { releaseAccountHold } from '../../src/queue/holds.js';
import { rerunFailed } from '../../src/queue/rerun.js';
import { FEED_EVERY_MS } from '../../workers/housekeeping.js';
import { KnownActive } from '../../workers/known-active.js';
import { startWorker, type WorkerHandle } from '../../workers/worker.js';
import { type Harness, makePlates, sleep, startHarness } from '../helpers/engine.js';
import { ManualClock, runningClock } from '../helpers/manual-clock.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const ACCOUNTS = Array.from({ length: 20 }, (_, i) => ({ id: `a${i}`, rateLimit: '50/s' }));

let h: Harness | undefined;
let own: DedicatedRedis | undefined;
let proxy: TcpProxy | undefined;
let cut: WorkerHandle | undefined;
afterEach(async () => {
  await cut?.close();
  cut = undefined;
  await proxy?.close();
  proxy = undefined;
  await h?.close();
  h = undefined;
  await own?.close();
  own = undefined;
});

async function info(field: string, section: string): Promise<number> {
  const text = await h!.redis.redis.info(section);
  return Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(text)?.[1]);
}

async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not ${what} after ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** The worker's first pass is over: every account activated (a generation), found idle and let go. */
async function firstPassDone(): Promise<void> {
  const flag = h!.services.keys.schedActiveFlag('a1');
  await waitFor(
    'the first pass done',
    async () =>
      Number(await h!.redis.redis.hget(flag, 'gen')) > 0 && (await h!.services.scheduler.activeAccounts()).length === 0,
  );
}

/** `n` of the worker's feed passes on `clock`, each let finish its Redis calls before the next. */
async function passes(clock: ManualClock, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    clock.advance(FEED_EVERY_MS);
    await sleep(10);
  }
}

describe('idle accounts', () => {
  it('20 accounts with nothing queued: no Worker, a few connections and commands per process whatever the accounts', async () => {
    // A server of its own: INFO counts every client's commands, and `npm test`'s other lane uses the shared one.
    own = await startRedisServer();
    h = await startHarness({ label: 'idle', accounts: ACCOUNTS, workers: 0, redisUrl: own.url });
    const clientsBefore = await info('connected_clients', 'clients');
    // The worker on a clock the test owns: its feed passes, pings and presence run when the test
    // moves time, so what it costs is counted per pass, not per second of a busy machine.
    const clock = new ManualClock(Date.now());
    const worker = h.startWorker({ clock });
    // The first pass activates every configured account, finds each idle and lets it go. It may
    // outlast the passes' 10 ms each on a loaded machine (a CI run caught it with 9 of 20 let go):
    // its end is waited for, not assumed.
    await passes(clock, 10);
    await waitFor('every account let go', async () => (await h!.services.scheduler.activeAccounts()).length === 0);
    expect(worker.workers).toHaveLength(0);
    // The worker's command connection, the one its Workers share, the wake subscriber: none per account.
    expect(await info('connected_clients', 'clients')).toBeLessThanOrEqual(clientsBefore + 3);
    const before = await info('total_commands_processed', 'stats');
    const PASSES = 100;
    await passes(clock, PASSES);
    // Less our own INFO call.
    const perPass = ((await info('total_commands_processed', 'stats')) - before - 1) / PASSES;
    const clients = (await info('connected_clients', 'clients')) - clientsBefore;
    console.log(
      `20 idle accounts, one worker process: ${perPass.toFixed(2)} Redis commands a feed pass, ${clients} connections`,
    );
    // Read 0.44: the deadline watch's set every 2 s (10), the active set every 10 s (2: the wakes
    // tell the process of the accounts that join it), and the process's own pings and presence.
    // Read every pass, as before, the active set alone was one a pass (1.42 in all). One command a
    // pass per account would be 20 more; before issue 21 each pass fed every account, ~140
    // commands a pass for these 20.
    expect(perPass).toBeLessThan(0.8);
    await runningClock(clock, h.close());
    h = undefined;
  });

  it('an account with work gets a Worker for its batch, the others none, and it stops once the account is idle', async () => {
    h = await startHarness({ label: 'idle-busy', accounts: ACCOUNTS, workers: 0 });
    const worker: WorkerHandle = h.startWorker();
    await h.enqueue('busy-a7', makePlates(20), { account: 'a7' });
    await waitFor('running a Worker', () => worker.workers.length === 1);
    expect([...worker.clients.keys()]).toEqual(['a7']);
    await h.waitForBatch('busy-a7');
    expect((await h.services.batchViews.get('busy-a7')).counts.done).toBe(20);
    expect(h.sim.stats().creates).toBe(20);
    // Idle again: out of the active set at once, the Worker stopped after its grace.
    await waitFor('out of the active set', async () => (await h!.services.scheduler.activeAccounts()).length === 0);
    await waitFor('without a Worker', () => worker.workers.length === 0);
    // And it comes back when work does.
    await h.enqueue('busy-a7-again', makePlates(5, 100), { account: 'a7' });
    await h.waitForBatch('busy-a7-again');
    expect(h.sim.stats().creates).toBe(25);
  });

  it('20 busy accounts: a Worker each, and no more connections than idle (no Worker holds one of its own)', async () => {
    // A server of its own, as above: connected_clients counts every test file's connections.
    own = await startRedisServer();
    h = await startHarness({
      label: 'busy-conns',
      accounts: ACCOUNTS,
      workers: 0,
      sim: { completionMs: [300, 600] },
      redisUrl: own.url,
    });
    const clientsBefore = await info('connected_clients', 'clients');
    const worker = h.startWorker();
    await sleep(500);
    const idleClients = (await info('connected_clients', 'clients')) - clientsBefore;
    for (const [i, a] of ACCOUNTS.entries())
      await h.enqueue(`busy-${a.id}`, makePlates(30, i * 100), { account: a.id });
    await waitFor('a Worker per busy account', () => worker.workers.length === ACCOUNTS.length);
    const busyClients = (await info('connected_clients', 'clients')) - clientsBefore;
    console.log(`20 busy accounts, one worker process: ${busyClients} connections (idle: ${idleClients})`);
    // BullMQ's default gives each Worker a blocking connection: 20 more here (workers/doorbell.ts).
    expect(busyClients).toBe(idleClients);
    for (const a of ACCOUNTS) await h.waitForBatch(`busy-${a.id}`);
    expect(h.sim.stats().creates).toBe(ACCOUNTS.length * 30);
  });

  it("a producer's feed wakes the account's waiting Worker at once, not at the process's next feed pass", async () => {
    // The worker runs on a clock the test owns (test/helpers/manual-clock.ts): its feed passes,
    // rests, polls and the doorbell's own timers fire only when the test moves it. Once the
    // account's Worker waits for work, the clock stands still: a plate enqueued then is taken only
    // if the producer's wake rings the doorbell, since nothing on the clock will ever look again.
    // (Before the wake, it waited for the next feed pass after the account's rest: up to 2.5 s.)
    h = await startHarness({
      label: 'wake',
      accounts: [{ id: 'slow', rateLimit: '30/min' }],
      workers: 0,
      sim: { completionMs: [30_000, 30_000] },
      config: { VQ_POLL_ADAPTIVE: 'false', VQ_POLL_INITIAL: '20s' },
    });
    const clock = new ManualClock(Date.now());
    // The account has met its upstream before: first contact would hold plates 2-4 until the
    // first plate's answer (one create at a time), and this test is about the wake.
    await h.services.answers.learn('slow', { id: '/body/queryId', status: '/body/status' }, clock.now());
    h.startWorker({ clock, random: () => 1 });
    const queue = h.services.accounts.queue('slow');
    const taken = async (i: number, plate: string) =>
      (await queue.getJob(jobIdFor(`wake-${i}`, plate)))?.processedOn !== undefined;
    // The first plate: the clock moves until a feed pass starts the account's Worker and it takes
    // the job, sends its create (a slot free at once) and waits for more.
    const first = makePlates(1, 0)[0]!;
    await h.enqueue('wake-0', [first], { account: 'slow' });
    await waitFor('the first plate taken, on feed passes', async () => {
      clock.advance(FEED_EVERY_MS);
      return await taken(0, first);
    });
    await waitFor('its create sent', () => h!.sim.stats().creates === 1);
    for (let i = 1; i < 4; i++) {
      const plate = makePlates(1, i)[0]!;
      const stoodAt = clock.now();
      await h.enqueue(`wake-${i}`, [plate], { account: 'slow' });
      // A bound against a hang, not a timing: without the wake it is never taken.
      await waitFor(`plate ${i} taken with the clock standing still`, () => taken(i, plate), 10_000);
      expect(clock.now()).toBe(stoodAt);
    }
    // Their creates wait for slots 2 s apart on the worker's clock, which did not move.
    expect(h.sim.stats().creates).toBe(1);
    // The worker's stop lets its running jobs end on its clock.
    await runningClock(clock, h.close());
    h = undefined;
  });

  it('a retry after the account went idle (its Worker stopped) is run: the rerun wakes the account', async () => {
    const plates = makePlates(6);
    h = await startHarness({
      label: 'idle-retry',
      accounts: ACCOUNTS.slice(0, 2),
      workers: 0,
      sim: { failPlates: [plates[2]!] },
    });
    // The active set is read past the test's timeout: the account is heard of (the rerun's wake).
    const worker = h.startWorker({ activeReadEveryMs: 3_600_000 });
    await h.enqueue('retry-a1', plates, { account: 'a1' });
    await h.waitForBatch('retry-a1');
    expect((await h.services.batchViews.get('retry-a1')).counts).toMatchObject({ done: 5, failed: 1 });
    await waitFor('without a Worker', () => worker.workers.length === 0);
    const polled = h.sim.stats().gets;
    // The failed plate's query was paid for: the retry polls it again (a job put straight on the queue).
    expect(await rerunFailed(h.services, 'retry-a1')).toEqual({ retried: 1, recreated: 0, skipped: 0 });
    await h.waitForBatch('retry-a1');
    expect(h.sim.stats().gets).toBeGreaterThan(polled);
    expect(h.sim.stats().creates).toBe(6);
    expect((await h.services.batchViews.get('retry-a1')).counts).toMatchObject({ done: 5, failed: 1 });
  });

  it("a batch queued while its account's creates are held starts when they are let go: its feed woke the workers, though it queued nothing", async () => {
    h = await startHarness({ label: 'idle-held', accounts: ACCOUNTS.slice(0, 2), workers: 0 });
    // The active set is read past the test's timeout: the account is known from the producer's wake only.
    h.startWorker({ activeReadEveryMs: 3_600_000 });
    await firstPassDone();
    // The day cap's hold: the producer's feed puts no create on the queue while it lasts.
    await h.services.accounts.line('a1').holdCreates(Date.now() + 3_600_000, 'day');
    await h.enqueue('held-a1', makePlates(4), { account: 'a1' });
    expect(await h.services.scheduler.waiting({ id: 'held-a1', account: 'a1' })).toBe(4);
    await releaseAccountHold(h.services, 'a1');
    await h.waitForBatch('held-a1');
    expect((await h.services.batchViews.get('held-a1')).counts.done).toBe(4);
    expect(h.sim.stats().creates).toBe(4);
  });

  it("a wake lost while the worker's connections were cut: the set is read once its subscription stands again", async () => {
    h = await startHarness({ label: 'idle-cut', accounts: ACCOUNTS.slice(0, 2), workers: 0 });
    // The worker reaches Redis through a proxy the test cuts; the harness's producer does not.
    proxy = await startTcpProxy(h.config.redis.nodes[0]!.port, h.config.redis.nodes[0]!.host);
    const config = { ...h.config, redis: { ...h.config.redis, nodes: [{ host: '127.0.0.1', port: proxy.port }] } };
    // The active set is read past the test's timeout: the account is known from a wake or a read.
    cut = startWorker(config, { logger: h.logs.logger, activeReadEveryMs: 3_600_000 });
    await firstPassDone();
    await waitFor(
      'the wakes heard',
      async () => Number((await h!.redis.redis.pubsub('NUMSUB', h!.services.keys.wake))[1]) > 0,
    );
    proxy.set('cut');
    await waitFor(
      'the wakes unheard',
      async () => Number((await h!.redis.redis.pubsub('NUMSUB', h!.services.keys.wake))[1]) === 0,
    );
    // Queued while the link is down: its wake is published to nobody.
    await h.enqueue('cut-a1', makePlates(4), { account: 'a1' });
    proxy.set('pass');
    await h.waitForBatch('cut-a1', 30_000);
    expect((await h.services.batchViews.get('cut-a1')).counts.done).toBe(4);
    expect(h.sim.stats().creates).toBe(4);
  });

  it('work left where no active set names it (an upgrade, a lost key) is found when a worker starts', async () => {
    h = await startHarness({ label: 'idle-upgrade', accounts: ACCOUNTS, workers: 0 });
    await h.enqueue('before-upgrade', makePlates(10), { account: 'a3' });
    await h.redis.redis.del(h.services.keys.schedActive);
    h.startWorker();
    await h.waitForBatch('before-upgrade');
    expect((await h.services.batchViews.get('before-upgrade')).counts.done).toBe(10);
  });
});

describe('the active set as a worker process knows it (workers/known-active.ts)', () => {
  it('read at every pass until wakes are heard, and once more then; kept from wakes and idle feeds; read every readEveryMs', async () => {
    h = await startHarness({ label: 'known-active', accounts: ACCOUNTS.slice(0, 5), workers: 0 });
    const scheduler = h.services.scheduler;
    const known = new KnownActive(scheduler, new Set(['a0', 'a1', 'a2', 'a4']), 10_000);
    await scheduler.activate(['a0', 'a3']);
    // a3 is not served here (another process's account).
    expect(await known.accounts(0)).toEqual(['a0']);
    // No subscription yet: each pass reads.
    await scheduler.activate(['a1']);
    expect((await known.accounts(200)).sort()).toEqual(['a0', 'a1']);
    // The subscription stands: one more read, since a wake sent before its confirmation was not heard.
    await scheduler.activate(['a4']);
    known.listening();
    expect((await known.accounts(300)).sort()).toEqual(['a0', 'a1', 'a4']);
    // Listening: what joins without a wake is found at the next read only, 10 s after the last.
    await scheduler.activate(['a2']);
    expect((await known.accounts(400)).sort()).toEqual(['a0', 'a1', 'a4']);
    known.heard('a2');
    known.heard('a3');
    expect((await known.accounts(600)).sort()).toEqual(['a0', 'a1', 'a2', 'a4']);
    known.left('a0');
    known.left('a4');
    expect((await known.accounts(800)).sort()).toEqual(['a1', 'a2']);
    // The wake connection closed: every pass reads until the subscription stands again.
    known.deaf();
    expect((await known.accounts(900)).sort()).toEqual(['a0', 'a1', 'a2', 'a4']);
    known.left('a4');
    expect((await known.accounts(1_000)).sort()).toEqual(['a0', 'a1', 'a2', 'a4']);
    known.listening();
    known.left('a4');
    expect((await known.accounts(1_100)).sort()).toEqual(['a0', 'a1', 'a2', 'a4']);
    known.left('a4');
    expect((await known.accounts(1_200)).sort()).toEqual(['a0', 'a1', 'a2']);
    // The read 10 s after the last: a4 is still in the set in Redis (nothing retired it there).
    expect((await known.accounts(11_200)).sort()).toEqual(['a0', 'a1', 'a2', 'a4']);
  });

  it('a wake heard while a read is out is kept, though the read began before it', async () => {
    h = await startHarness({ label: 'known-active-race', accounts: ACCOUNTS.slice(0, 2), workers: 0 });
    const known = new KnownActive(h.services.scheduler, new Set(['a0', 'a1']), 10_000);
    const reading = known.accounts(0);
    known.heard('a1');
    expect(await reading).toEqual(['a1']);
  });
});
