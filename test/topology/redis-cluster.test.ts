// Redis Cluster: a real 3-master cluster started by the test. Each account's keys share its own
// slot (keys.ts), so the accounts spread over the masters: 30 busy accounts put a fair part of the
// load on each. `vqb run` is pointed at a node that does NOT own its account's slot (a plain
// client would answer MOVED), and the slot is migrated to another master while the batch runs
// (SETSLOT IMPORTING/MIGRATING, MIGRATE … KEYS until the slot is empty, SETSLOT NODE): the batch
// still finishes, each plate with one outcome and one create.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError, isError, RedisUnavailableError } from '../../src/errors.js';
import { createVqb } from '../../src/index.js';
import { connectRedis, deleteKeysByPrefix, preflightRedis } from '../../src/redis/connection.js';
import { freePort } from '../../src/redis/server.js';
import { openQueueServices } from '../../src/services.js';
import { type Harness, type HarnessOptions, makePlates, sleep, useHarness } from '../helpers/engine.js';
import { waitingIngest } from '../helpers/ingest-lock.js';
import { ManualClock } from '../helpers/manual-clock.js';
import { harnessEnv, rejection, spawnVqb, waitFor } from '../helpers/process.js';
import { startCluster, type TestCluster } from '../helpers/redis-topology.js';

const harness = useHarness();
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startCluster(3);
}, 60_000);

afterAll(async () => {
  await cluster?.close();
});

const urlOf = (port: number) => `redis://127.0.0.1:${port}`;

/** The harness on the test cluster, every master a seed. */
function onCluster(options: Omit<HarnessOptions, 'config'>): Promise<Harness> {
  const seeds = cluster.nodes.map((n) => urlOf(n.port)).join(',');
  return harness.start({ ...options, config: { VQ_REDIS_MODE: 'cluster', REDIS_URL: seeds } });
}

describe('Redis Cluster', () => {
  it('30 busy accounts spread over 3 masters: each serves at least 20 % of the commands, one create per plate', async () => {
    const accounts = Array.from({ length: 30 }, (_, i) => ({
      id: `c${String(i).padStart(2, '0')}`,
      rateLimit: '20/s',
    }));
    const h = await onCluster({
      label: 'cluster-spread',
      workers: 0,
      accounts,
      sim: { completionMs: [100, 300] },
    });
    // Where the accounts' slots are: the count per master the load should follow.
    const owners = await Promise.all(
      accounts.map(async (a) => (await cluster.ownerOf(await cluster.slotOf(h.services.keys.accountTag(a.id)))).port),
    );
    const perMaster = cluster.nodes.map((n) => owners.filter((p) => p === n.port).length);
    const processed = () =>
      Promise.all(
        cluster.nodes.map(async (n) =>
          Number(/^total_commands_processed:(\d+)/m.exec(await n.redis.info('stats'))?.[1] ?? 0),
        ),
      );
    h.startWorker();
    const before = await processed();
    const plates = makePlates(accounts.length * 10, 40_000);
    await Promise.all(
      accounts.map((a, i) => h.enqueue(`spread-${a.id}`, plates.slice(i * 10, i * 10 + 10), { account: a.id })),
    );
    for (const a of accounts) await h.waitForBatch(`spread-${a.id}`, 120_000);
    const after = await processed();
    const served = after.map((n, i) => n - before[i]!);
    const total = served.reduce((a, b) => a + b, 0);
    const shares = served.map((n) => n / total);
    console.log(
      `30 accounts over 3 masters (accounts per master ${perMaster.join(' / ')}): commands ${served.join(' / ')}, shares ${shares.map((x) => x.toFixed(2)).join(' / ')}`,
    );
    for (const share of shares) expect(share).toBeGreaterThanOrEqual(0.2);
    const stats = h.sim.stats({ plates: true });
    expect(stats.creates).toBe(plates.length);
    expect(stats.maxCreatesPerPlate).toBe(1);
    expect(stats.rateLimited).toBe(0);
    // Each account's keys sit on its own slot: the master that owns it holds them, the others none.
    const a0 = accounts[0]!.id;
    const slot0 = await cluster.slotOf(h.services.keys.accountTag(a0));
    expect(await (await cluster.ownerOf(slot0)).redis.cluster('COUNTKEYSINSLOT', slot0)).toBeGreaterThan(0);
  }, 240_000);

  it("a batch through `vqb run` at a node without its account's slot finishes across a migration of that slot: one outcome and one create per plate", async () => {
    const h = await onCluster({
      label: 'cluster',
      workers: 0,
      sim: { completionMs: [200, 600] },
    });
    const tag = h.services.keys.accountTag(h.config.accounts[0]!.id);
    const slot = await cluster.slotOf(tag);
    const owner = await cluster.ownerOf(slot);
    const elsewhere = cluster.nodes.filter((n) => n !== owner);
    // The node the CLI is given answers MOVED for every key of the account.
    const moved = await elsewhere[0]!.redis.get(`x:{${tag}}:probe`).catch((err: Error) => err.message);
    expect(moved).toMatch(/^MOVED /);

    const n = 300;
    const plates = makePlates(n, 30_000);
    const file = join(h.config.outDir, '..', 'cluster.csv');
    await writeFile(file, `placa\r\n${plates.join('\r\n')}\r\n`);
    const run = spawnVqb(
      ['run', file],
      harnessEnv(h, {
        VQ_REDIS_MODE: 'cluster',
        REDIS_URL: urlOf(elsewhere[0]!.port),
        VQ_RATE_LIMIT: '60/s',
        // While the slot is half moved the workers' scripts wait out TRYAGAIN (up to ~4 s here): a
        // lock longer than that keeps their jobs (the tests' usual 2 s lock would expire). Short
        // enough that BullMQ renews the locks (every 1.5 s) while the slot is half moved, which
        // before HeldLocks was said as lost locks in one run out of two here.
        VQ_LOCK_DURATION: '6s',
      }),
      240_000,
    );

    // Mid-batch: move the account's slot to another master, a few keys at a time, while the workers write.
    while (h.sim.stats().creates < 60 && run.child.exitCode === null) await sleep(50);
    expect(run.child.exitCode).toBeNull();
    // Ten keys per MIGRATE (as redis-cli --cluster reshard does), and between two MIGRATEs the
    // workers make one more upstream request (or a quarter second passes): they run while the slot
    // is half moved, getting ASK and TRYAGAIN answers.
    const requests = () => h.sim.stats().creates + h.sim.stats().gets;
    let steps = 0;
    const keysMoved = await cluster.migrateSlot(slot, elsewhere[1]!, {
      batch: 10,
      between: async () => {
        steps++;
        const before = requests();
        for (let i = 0; i < 25 && requests() === before && run.child.exitCode === null; i++) await sleep(10);
      },
    });
    const createsAtMigrationEnd = h.sim.stats().creates;
    expect(keysMoved).toBeGreaterThan(0);
    expect(steps).toBeGreaterThan(1);
    expect((await cluster.ownerOf(slot)).port).toBe(elsewhere[1]!.port);

    const { code, stdout, stderr } = await run.done;
    // Nothing is said. BullMQ's renewal of all the locks at once meets the slot half moved and
    // reports locks already moved as lost (a fresh-clone CI run read 15 such warnings); each is
    // renewed on its own, its keys declared (workers/lock-loss.ts, HeldLocks), and kept.
    expect(stderr.split('\n').filter((line) => line !== '')).toEqual([]);
    expect(stdout).not.toMatch(/MOVED|ASK|TRYAGAIN|CROSSSLOT/);
    expect(code).toBe(0);
    expect(createsAtMigrationEnd).toBeLessThan(n); // the migration happened while plates were still being created

    const batchId = /batch (cluster-[0-9a-f]{12})/.exec(stdout)![1]!;
    const info = await h.services.batchViews.get(batchId);
    expect(info.counts).toMatchObject({ total: n, enqueued: n, done: n, failed: 0, possibleDuplicates: 0 });
    for (const plate of plates)
      expect((await h.services.outcomes.get(await h.services.batches.ref(batchId), plate))?.status, plate).toBe('done');
    const stats = h.sim.stats({ plates: true });
    expect(Object.keys(stats.createsByPlate ?? {}).sort()).toEqual([...plates].sort());
    expect(Object.entries(stats.createsByPlate ?? {}).filter(([, c]) => c !== 1)).toEqual([]);
    // Every key of the batch moved with the slot: the old owner holds none.
    expect(await owner.redis.cluster('COUNTKEYSINSLOT', slot)).toBe(0);
  }, 300_000);

  it("an ingest waiting on another's lock hears its release (published by a script on the lock's master)", async () => {
    const h = await onCluster({
      label: 'cluster-unlock',
      workers: 0,
    });
    await h.open('unlock');
    const held = await h.services.batches.lockIngest('unlock');
    const clock = new ManualClock(Date.now());
    const second = await waitingIngest(h, 'unlock', clock);
    expect(second.waits).toHaveLength(1);
    await held.release();
    // The lock lives 60 s and the waiter's clock stands still: only the release's message, from
    // the lock's master to the waiter's node, lets it take the lock.
    await waitFor(async () => second.taken(), 10_000, 'the lock taken with the clock standing still');
    await (await second.lock).release();
  }, 30_000);

  it("the library's batch.done() hears the finish a script published on the batch's master", async () => {
    const h = await onCluster({
      label: 'cluster-done',
      sim: { completionMs: [100, 300] },
    });
    const vqb = await createVqb({ config: h.config, logger: h.logs.logger });
    try {
      const batch = await vqb.enqueue(makePlates(3), { name: 'heard' });
      // No read of the batch due for an hour: only the published finish ends the wait in time.
      const finished = await batch.done({ pollMs: 3_600_000 });
      expect(finished.counts.done).toBe(3);
    } finally {
      await vqb.close();
    }
  }, 60_000);

  it('start-up checks ask every master, and prefix deletes reach every master', async () => {
    const config = loadConfig(
      {},
      { VQ_REDIS_MODE: 'cluster', REDIS_URL: urlOf(cluster.nodes[0]!.port), VQ_PREFIX: '{vqbtest-preflight}' },
    );
    const redis = connectRedis(config.redis, { failFast: true });
    try {
      await preflightRedis(redis, config);
      // One master that may evict is enough to refuse, and the message says which.
      const last = cluster.nodes[2]!;
      await last.redis.config('SET', 'maxmemory-policy', 'allkeys-lru');
      try {
        await expect(preflightRedis(redis, config)).rejects.toMatchObject({
          code: 'REDIS_EVICTION_POLICY',
          message: expect.stringContaining(`allkeys-lru on 127.0.0.1:${last.port}`),
        });
      } finally {
        await last.redis.config('SET', 'maxmemory-policy', 'noeviction');
      }
      // Keys of many slots (no hash tag), on every master: all deleted.
      for (let i = 0; i < 50; i++) await redis.set(`vqbtest-spread:${i}`, 'x');
      const perNode = await Promise.all(cluster.nodes.map((n) => n.redis.dbsize()));
      expect(perNode.filter((c) => c > 0).length).toBe(3);
      expect(await deleteKeysByPrefix(redis, 'vqbtest-spread:')).toBe(50);
    } finally {
      redis.disconnect();
    }
  });

  it('an unreachable cluster is one RedisUnavailableError naming REDIS_URL, without the password', async () => {
    const config = loadConfig(
      {},
      { VQ_REDIS_MODE: 'cluster', REDIS_URL: `redis://:hunter2@127.0.0.1:${await freePort()}` },
    );
    const err = await rejection(openQueueServices(config));
    expect(isError(err, RedisUnavailableError)).toBe(true);
    expect(err.message).toMatch(/^cannot reach Redis at cluster redis:\/\/127\.0\.0\.1:\d+ \(set REDIS_URL\)$/);
  });

  it('refuses a prefix without a {hash tag} in cluster mode, naming VQ_PREFIX', () => {
    let err: unknown;
    try {
      loadConfig({}, { VQ_REDIS_MODE: 'cluster', REDIS_URL: urlOf(cluster.nodes[0]!.port), VQ_PREFIX: 'vqb' });
    } catch (e) {
      err = e;
    }
    expect(isError(err, ConfigError)).toBe(true);
    expect((err as ConfigError).variable).toBe('VQ_PREFIX');
    expect((err as Error).message).toMatch(/hash tag/);
  });
});
