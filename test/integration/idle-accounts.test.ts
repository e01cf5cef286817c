// Idle accounts cost nothing (issue 21): a worker process runs a BullMQ Worker, and feeds, only
// for accounts with work (the scheduler's active set). Before, every configured account had a
// Worker (a blocking connection each) and was fed every 200 ms: 20 idle accounts cost ~700 Redis
// commands/s and 22+ connections per process.
import { afterEach, describe, expect, it } from 'vitest';
import { jobIdFor } from '../../src/queue/account-queues.js';
import { rerunFailed } from '../../src/queue/rerun.js';
import type { WorkerHandle } from '../../workers/worker.js';
import { type Harness, makePlates, sleep, startHarness } from '../helpers/engine.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';

const ACCOUNTS = Array.from({ length: 20 }, (_, i) => ({ id: `a${i}`, rateLimit: '50/s' }));

let h: Harness | undefined;
let own: DedicatedRedis | undefined;
afterEach(async () => {
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

describe('idle accounts', () => {
  it('20 accounts with nothing queued: no Worker, a few connections and commands per process whatever the accounts', async () => {
    // A server of its own: INFO counts every client's commands, and `npm test`'s other lane uses the shared one.
    own = await startRedisServer();
    h = await startHarness({ label: 'idle', accounts: ACCOUNTS, workers: 0, redisUrl: own.url });
    const clientsBefore = await info('connected_clients', 'clients');
    const worker = h.startWorker();
    await sleep(1_500);
    expect(worker.workers).toHaveLength(0);
    expect(await h.services.scheduler.activeAccounts()).toEqual([]);
    // The worker's command connection, the one its Workers share, the wake subscriber: none per account.
    expect(await info('connected_clients', 'clients')).toBeLessThanOrEqual(clientsBefore + 3);
    const before = await info('total_commands_processed', 'stats');
    await sleep(3_000);
    const perSecond = ((await info('total_commands_processed', 'stats')) - before) / 3;
    const clients = (await info('connected_clients', 'clients')) - clientsBefore;
    console.log(
      `20 idle accounts, one worker process: ${perSecond.toFixed(1)} Redis commands/s, ${clients} connections`,
    );
    // A read of the active set every 200 ms, a PING every 2 s, presence every 10 s (+ our INFO calls).
    expect(perSecond).toBeLessThan(25);
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
    // 30/min: the feed pass rests 2 s on this account between looks (Feeder.restMs), 2.5 s with
    // its jitter drawn at the top (random 1). Plates are enqueued 3 s apart (a slot is free every
    // 2 s) while the ones before wait for their first poll (20 s): the account is busy, its Worker
    // waits for work, and only a wake has it take the new job at once. Read is when BullMQ made
    // the job active (processedOn).
    h = await startHarness({
      label: 'wake',
      accounts: [{ id: 'slow', rateLimit: '30/min' }],
      workers: 0,
      sim: { completionMs: [30_000, 30_000] },
      config: { VQ_POLL_ADAPTIVE: 'false', VQ_POLL_INITIAL: '20s' },
    });
    // The account has met its upstream before: first contact would hold plates 2-4 for the first
    // plate's 30 s (one create at a time), and this test is about the wake.
    await h.services.answers.learn('slow', { id: '/body/queryId', status: '/body/status' }, Date.now());
    h.startWorker({ random: () => 1 });
    const queue = h.services.accounts.queue('slow');
    const latencies: number[] = [];
    for (let i = 0; i < 4; i++) {
      const plate = makePlates(1, i)[0]!;
      const at = Date.now();
      await h.enqueue(`wake-${i}`, [plate], { account: 'slow' });
      let taken: number | undefined;
      await waitFor('taken', async () => {
        taken = (await queue.getJob(jobIdFor(`wake-${i}`, plate)))?.processedOn;
        return taken !== undefined;
      });
      if (i > 0) latencies.push(taken! - at);
      await sleep(3_000 - (Date.now() - at));
    }
    console.log(`enqueue -> job taken by a waiting Worker, ms: ${latencies.join(', ')}`);
    // Without the wake each waits for the rest's end, up to 2.5 s: a fifth of that rules it out
    // on a machine as loaded as CI's (read 5-60 ms quiet).
    for (const ms of latencies) expect(ms).toBeLessThan(500);
    expect(h.sim.stats().creates).toBe(4);
  });

  it('a retry after the account went idle (its Worker stopped) is run: the rerun wakes the account', async () => {
    const plates = makePlates(6);
    h = await startHarness({
      label: 'idle-retry',
      accounts: ACCOUNTS.slice(0, 2),
      workers: 0,
      sim: { failPlates: [plates[2]!] },
    });
    const worker = h.startWorker();
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

  it('work left where no active set names it (an upgrade, a lost key) is found when a worker starts', async () => {
    h = await startHarness({ label: 'idle-upgrade', accounts: ACCOUNTS, workers: 0 });
    await h.enqueue('before-upgrade', makePlates(10), { account: 'a3' });
    await h.redis.redis.del(h.services.keys.schedActive);
    h.startWorker();
    await h.waitForBatch('before-upgrade');
    expect((await h.services.batchViews.get('before-upgrade')).counts.done).toBe(10);
  });
});
