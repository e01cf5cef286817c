// Redis Sentinel: one primary, one replica, three sentinels, started by the test. `vqb run` finds
// the primary through the sentinels; `SENTINEL FAILOVER` mid-batch promotes the replica, and the
// batch still finishes. Replication is asynchronous, so a write the old primary took just before
// it was demoted may be lost: a plate may then be created again, and such a plate must be flagged
// as a possible duplicate. Every other plate is created once.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { jobKeys } from '../../src/engine/bullmq/keys.js';
import { ConfigError, isError } from '../../src/errors.js';
import { type Harness, makePlates, sleep, useHarness } from '../helpers/engine.js';
import { harnessEnv, spawnVqb } from '../helpers/process.js';
import { startSentinels, type TestSentinels } from '../helpers/redis-topology.js';

const harness = useHarness();

/**
 * Where a batch that did not finish keeps its plates: the account's BullMQ jobs (state, priority,
 * step, attempts, the lock's ms to live), its pending list, the plates staged for the queue, the
 * scheduler's classes and active flag, and the account's queries in flight (paid, not yet read).
 */
async function whereThePlatesAre(h: Harness, batchId: string): Promise<Record<string, unknown>> {
  const { redis, keys } = h.services;
  const account = 'default';
  const states = ['wait', 'prioritized', 'delayed', 'active', 'waiting-children'] as const;
  const jobs = await h.queue.getJobs([...states], 0, 30);
  return {
    counts: await h.queue.getJobCounts(...states, 'completed', 'failed'),
    jobs: await Promise.all(
      // With the lock's time to live: a job active and still locked is held by a live worker.
      jobs.map(async (j) => [
        j.id,
        await j.getState(),
        j.priority,
        (j.data as { step?: string }).step,
        j.attemptsMade,
        await redis.pttl(jobKeys(j).lock),
      ]),
    ),
    pending: await redis.llen(keys.pending(await h.services.batches.ref(batchId))),
    staged: await redis.zrange(keys.staged(account), '0', '30'),
    classes: await Promise.all(
      ['interactive', 'normal', 'bulk'].map((c) => redis.zrange(keys.schedClass(account, c), '0', '-1', 'WITHSCORES')),
    ),
    activeFlag: await redis.hgetall(keys.schedActiveFlag(account)),
    inflight: await redis.zrange(keys.inflight(account), '0', '30', 'WITHSCORES'),
  };
}

let topology: TestSentinels;

beforeAll(async () => {
  topology = await startSentinels();
}, 60_000);

afterAll(async () => {
  await topology?.close();
});

describe('Redis Sentinel', () => {
  it('a batch through `vqb run` finishes across SENTINEL FAILOVER; a plate created twice is flagged', async () => {
    const settings = { VQ_REDIS_MODE: 'sentinel', REDIS_SENTINELS: topology.list, REDIS_SENTINEL_NAME: topology.name };
    const h = await harness.start({
      label: 'sentinel',
      workers: 0,
      config: settings,
      sim: { completionMs: [200, 600] },
    });
    const n = 300;
    const plates = makePlates(n, 50_000);
    const file = join(h.config.outDir, '..', 'sentinel.csv');
    await writeFile(file, `placa\r\n${plates.join('\r\n')}\r\n`);
    // The failover takes a few seconds (promotion, the old primary demoted, clients reconnected):
    // a lock longer than that keeps the running jobs (the tests' usual 2 s lock would expire).
    const run = spawnVqb(
      ['run', file],
      harnessEnv(h, { ...settings, VQ_RATE_LIMIT: '60/s', VQ_LOCK_DURATION: '15s' }),
      240_000,
    );

    while (h.sim.stats().creates < 60 && run.child.exitCode === null) await sleep(50);
    expect(run.child.exitCode).toBeNull();
    const before = await topology.primaryPort();
    expect(before).toBe(topology.primary.port);
    expect(await topology.sentinels[0]!.redis.call('SENTINEL', 'FAILOVER', topology.name)).toBe('OK');
    while ((await topology.primaryPort()) === before) await sleep(50);
    expect(await topology.primaryPort()).toBe(topology.replica.port);
    const createsAtFailover = h.sim.stats().creates;

    const { code, stdout, stderr } = await run.done;
    if (code !== 0) {
      // Seen in fresh-clone runs: `vqb run` still running at 240 s (stop 73 twice; stop 74 on main:
      // every job completed, the batch at done 299 and inflight 1, a plate's settle lost with the old
      // primary while its job's completion reached the new one). What it last said and where its
      // batch stood, for whoever reads the failure.
      const id = /batch (sentinel-[0-9a-f]{12})/.exec(stdout)?.[1];
      const counts = id ? (await h.services.batchViews.get(id)).counts : undefined;
      console.log(
        `sentinel: vqb run ended with ${code}; batch ${id} counts ${JSON.stringify(counts)}; ` +
          `${h.sim.stats().creates} creates at the simulator\nstdout's end:\n${stdout.slice(-3_000)}\n` +
          `stderr's end:\n${stderr.slice(-3_000)}`,
      );
      if (id) console.log(`sentinel: where its plates are: ${JSON.stringify(await whereThePlatesAre(h, id))}`);
    }
    // Locks the old primary took just before the failover are lost with it: BullMQ says so
    // ("Missing lock", "Lock mismatch") and runs those jobs again. Those lines are JSON, nothing else.
    for (const line of stderr.split('\n').filter(Boolean))
      expect(JSON.parse(line)).toMatchObject({ level: expect.any(Number), msg: expect.any(String) });
    expect(code).toBe(0);
    expect(createsAtFailover).toBeLessThan(n); // the failover happened while plates were still being created

    const batchId = /batch (sentinel-[0-9a-f]{12})/.exec(stdout)![1]!;
    const info = await h.services.batchViews.get(batchId);
    expect(info.counts).toMatchObject({ total: n, enqueued: n, done: n, failed: 0 });
    const stats = h.sim.stats({ plates: true });
    expect(Object.keys(stats.createsByPlate ?? {}).sort()).toEqual([...plates].sort());
    for (const plate of plates) {
      const outcome = await h.services.outcomes.get(await h.services.batches.ref(batchId), plate);
      expect(outcome?.status, plate).toBe('done');
      if ((stats.createsByPlate?.[plate] ?? 0) > 1)
        expect(outcome?.possibleDuplicate, `${plate} created twice but not flagged`).toBe(true);
    }
    expect(stats.creates - n).toBeLessThanOrEqual(info.counts.possibleDuplicates);
  }, 300_000);

  it('sentinel mode without REDIS_SENTINELS or REDIS_SENTINEL_NAME is a ConfigError naming the variable', () => {
    const failure = (env: Record<string, string>) => {
      try {
        loadConfig({}, { VQ_REDIS_MODE: 'sentinel', ...env });
      } catch (err) {
        return err;
      }
      return undefined;
    };
    const noSentinels = failure({ REDIS_SENTINEL_NAME: 'mymaster' });
    expect(isError(noSentinels, ConfigError) && noSentinels.variable).toBe('REDIS_SENTINELS');
    const noName = failure({ REDIS_SENTINELS: topology.list });
    expect(isError(noName, ConfigError) && noName.variable).toBe('REDIS_SENTINEL_NAME');
    const badList = failure({ REDIS_SENTINELS: '127.0.0.1', REDIS_SENTINEL_NAME: 'mymaster' });
    expect(isError(badList, ConfigError) && badList.variable).toBe('REDIS_SENTINELS');
  });
});
