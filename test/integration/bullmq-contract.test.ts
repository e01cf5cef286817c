// BullMQ's internals that vqb relies on (src/engine/bullmq/), checked against the installed BullMQ
// so an upgrade that moves any of them fails here, loudly, instead of in production: its script
// texts (key names, job hash fields, the lock, the marker), its key layout, its Worker's members;
// then the same at run time on a private prefix (a real Worker on vqb's quiet backend). Each check
// is also shown failing on a simulated change (a patched script, a fake class).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { DelayedError, type Job, Queue, QueueKeys, RedisQueueBackend, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { monitorRedis } from '../../bench/redis-monitor.js';
import { checkQueueKeys, checkScripts, checkWorker, type ScriptText } from '../../src/engine/bullmq/contract.js';
import { JOB_FIELDS, jobKeyPrefix, jobKeys, queueKeys, wakeAt } from '../../src/engine/bullmq/keys.js';
import { quietBackend, type WaitHooks, wakeMainLoop } from '../../src/engine/bullmq/worker.js';
import { JobFence } from '../../src/queue/job-fence.js';
import type { PlateJobData } from '../../src/queue/types.js';
import { REDIS_URL, type RedisTestContext, redisTestContext } from '../helpers/redis.js';

const COMMANDS = join(dirname(createRequire(import.meta.url).resolve('bullmq')), 'commands');
const installed: ScriptText = (file) => readFileSync(join(COMMANDS, file), 'utf8');

/** The installed scripts, one of them with `from` replaced by `to`. */
function patched(file: string, from: string | RegExp, to: string): ScriptText {
  return (f) => {
    const text = installed(f);
    if (f !== file) return text;
    const out = text.replace(from, to);
    if (out === text) throw new Error(`the patch of ${file} changed nothing`);
    return out;
  };
}

describe('the installed BullMQ keeps what vqb relies on', () => {
  it('its scripts: the lock, the job hash fields, the key kinds sched-feed counts, the marker', () => {
    expect(checkScripts(installed)).toEqual([]);
  });

  it('its key layout: every queue key type vqb hands its scripts', () => {
    expect(checkQueueKeys(QueueKeys)).toEqual([]);
  });

  it("its Worker: the concurrency setter, the backend methods replaced, the main loop's queue", () => {
    expect(checkWorker(Worker, RedisQueueBackend)).toEqual([]);
  });
});

describe('an upgrade that moves one fails the contract (simulated)', () => {
  it.each([
    [
      'a lock renamed',
      patched('includes/prepareJobForProcessing.lua', "jobKey .. ':lock'", "jobKey .. ':lease'"),
      'lock',
    ],
    ['job data in another field', patched('updateData-1.lua', '"data"', '"payload"'), '"data"'],
    [
      'priority in another field',
      patched('changePriority-7.lua', '"priority", priority', '"prio", priority'),
      '"priority"',
    ],
    [
      'the wait list a zset',
      patched('includes/getWaitPlusPrioritizedCount.lua', '"LLEN", waitKey', '"ZCARD", waitKey'),
      'wait list',
    ],
    [
      'the marker a list',
      patched('includes/addDelayMarkerIfNeeded.lua', /"ZADD", markerKey[^)]*/, '"LPUSH", markerKey, "1"'),
      'marker',
    ],
    [
      'the rate-limit switch its time to live alone',
      patched('includes/getRateLimitTTL.lua', 'maxJobs <= tonumber(rcall("GET", rateLimiterKey) or 0)', 'maxJobs'),
      'count is at `max`',
    ],
    [
      'a script gone',
      (f: string) => {
        if (f === 'includes/addDelayMarkerIfNeeded.lua') throw new Error('ENOENT');
        return installed(f);
      },
      'no script includes/addDelayMarkerIfNeeded.lua',
    ],
  ] as const)('%s', (_, read, named) => {
    const broken = checkScripts(read);
    expect(broken).toHaveLength(1);
    expect(broken[0]).toContain(named);
  });

  it('a queue key renamed', () => {
    class Renamed extends QueueKeys {
      override getKeys(name: string): Record<string, string> {
        const { marker, ...rest } = super.getKeys(name);
        return { ...rest, wake: marker! };
      }
    }
    expect(checkQueueKeys(Renamed)).toEqual(['BullMQ\'s queue has no key "marker" spelled p:q:marker (got undefined)']);
  });

  it('a Worker without the members, a backend without the methods', () => {
    class FakeWorker {
      #c = 1;
      async mainLoop(): Promise<void> {
        while (this.#c > 0) await Promise.resolve();
      }
    }
    class FakeBackend {
      close(): void {}
    }
    const broken = checkWorker(FakeWorker, FakeBackend);
    expect(broken).toContain("BullMQ's Worker has no concurrency setter");
    expect(broken).toContain("BullMQ's Redis backend has no method waitForJob (quietBackend replaces it)");
    expect(broken.some((b) => b.includes('mainLoopQueue'))).toBe(true);
    expect(broken.some((b) => b.includes('re-reads its concurrency'))).toBe(true);
    expect(broken.some((b) => b.includes('close'))).toBe(false);
  });
});

describe('at run time, on a private prefix', () => {
  let ctx: RedisTestContext;
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await ctx?.cleanup();
  });

  /** A bell that records what the Worker asked of it. */
  function recordingHooks(): { hooks: WaitHooks; waits: number[]; delayed: number[]; closed: () => boolean } {
    const waits: number[] = [];
    const delayed: number[] = [];
    let closed = false;
    let open: (() => void) | undefined;
    return {
      waits,
      delayed,
      closed: () => closed,
      hooks: {
        wait: (ms) => {
          waits.push(ms);
          return new Promise<void>((resolve) => {
            open = resolve;
            setTimeout(resolve, Math.min(ms, 50));
          });
        },
        interrupt: () => open?.(),
        delayed: (at) => void delayed.push(at),
        closed: () => {
          closed = true;
          open?.();
        },
      },
    };
  }

  it("a job's hash, its fields and its lock; the queue's keys; a Worker that waits, delays and is woken through vqb's hooks", async () => {
    ctx = await redisTestContext('bullmq-contract');
    const connection = ctx.redis.duplicate({ maxRetriesPerRequest: null });
    closers.push(async () => void (await connection.quit()));
    const queue = new Queue<{ n: number }, unknown, string>('q', { connection, prefix: ctx.prefix });
    closers.push(() => queue.close());
    const keys = queueKeys(queue);

    const job = await queue.add('plate', { n: 1 }, { jobId: 'b.ABC1D23', priority: 3 });
    const { hash, lock } = jobKeys(job);
    expect(hash).toBe(`${jobKeyPrefix(queue)}b.ABC1D23`);
    expect(await ctx.redis.hget(hash, JOB_FIELDS.data)).toBe(JSON.stringify({ n: 1 }));
    expect(await ctx.redis.hget(hash, JOB_FIELDS.priority)).toBe('3');
    expect(await ctx.redis.zcard(keys.prioritized)).toBe(1);
    await wakeAt(ctx.redis, queue, 5_000);
    await wakeAt(ctx.redis, queue, 9_000);
    expect(await ctx.redis.zscore(keys.marker, '1')).toBe('5000');

    const bell = recordingHooks();
    let release: (() => void) | undefined;
    const seen: { token?: string | undefined; lock?: string | null; woken?: boolean } = {};
    const worker = new Worker<{ n: number }, unknown, string>(
      'q',
      async (active: Job<{ n: number }, unknown, string>, token) => {
        seen.token = token;
        seen.lock = await ctx.redis.get(lock);
        seen.woken = wakeMainLoop(worker);
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        await active.moveToDelayed(Date.now() + 60_000, token);
        throw new DelayedError();
      },
      { connection, prefix: ctx.prefix, concurrency: 1 },
      quietBackend(() => bell.hooks),
    );
    closers.push(() => worker.close());
    // Run first (closers close in reverse): a failed assertion below leaves the job released, so
    // the Worker's close does not wait for it past the hook's timeout.
    closers.push(async () => release?.());
    // `woken` is set last, after the lock's read: the token alone came a round trip before it
    // (a CI run read the lock as undefined).
    await expect.poll(() => seen.woken, { timeout: 5_000 }).toBeDefined();
    // The lock holds the token BullMQ handed the processor; the main loop's queue was reached.
    expect(seen.lock).toBe(seen.token);
    expect(seen.woken).toBe(true);
    expect(await ctx.redis.llen(keys.active)).toBe(1);
    release?.();
    await expect.poll(() => bell.delayed.length, { timeout: 5_000 }).toBe(1);
    expect(bell.delayed[0]).toBeGreaterThan(Date.now() + 50_000);
    expect(await ctx.redis.zcard(keys.delayed)).toBe(1);
    // Nothing left to fetch: the Worker waits on the hooks, not on Redis.
    await expect.poll(() => bell.waits.length, { timeout: 5_000 }).toBeGreaterThan(0);
    await worker.close();
    expect(bell.closed()).toBe(true);
    expect(wakeMainLoop(worker)).toBe(false);
  });

  it('the rate-limit switch is the limiter key, read by its PTTL', async () => {
    ctx = await redisTestContext('bullmq-contract');
    const connection = ctx.redis.duplicate({ maxRetriesPerRequest: null });
    closers.push(async () => void (await connection.quit()));
    const queue = new Queue('q', { connection, prefix: ctx.prefix });
    closers.push(() => queue.close());
    await queue.rateLimit(20_000);
    const ttl = await ctx.redis.pttl(queueKeys(queue).limiter);
    expect(ttl).toBeGreaterThan(15_000);
    expect(await queue.getRateLimitTtl()).toBeGreaterThan(0);
  });

  it("the fence writes a job's data and priority in one command; BullMQ's public calls take two, and look at no lock", async () => {
    ctx = await redisTestContext('bullmq-contract');
    const connection = ctx.redis.duplicate({ maxRetriesPerRequest: null });
    closers.push(async () => void (await connection.quit()));
    const queue = new Queue<PlateJobData, unknown, string>('q', { connection, prefix: ctx.prefix });
    closers.push(() => queue.close());
    const data: PlateJobData = {
      account: 'a',
      batchId: 'b',
      cls: 'normal',
      plate: 'ABC1D23',
      product: 'p',
      step: 'create',
      polls: 0,
      requests: 0,
    };
    const [first, second] = await Promise.all(
      ['b.ABC1D23', 'b.XYZ9A87'].map((jobId) => queue.add('plate', data, { jobId, priority: 3 })),
    );
    const fence = new JobFence(connection);
    const next: PlateJobData = { ...data, step: 'poll', queryId: 'q1' };
    // Both scripts loaded first: a first EVALSHA answered NOSCRIPT would count twice.
    await fence.write(first!, undefined, { step: 'create' }, next, { priority: 2 });
    await second!.updateData(data);
    await second!.changePriority({ priority: 3 });

    let commands: string[] = [];
    const monitor = await monitorRedis(REDIS_URL, ({ args, source }) => {
      if (source !== 'lua' && args.some((a) => a.includes(ctx.prefix))) commands.push(String(args[0]).toLowerCase());
    });
    closers.push(async () => monitor.stop());
    const counted = async (step: () => Promise<unknown>): Promise<string[]> => {
      commands = [];
      await step();
      await ctx.redis.ping(ctx.prefix); // MONITOR reports commands in order: once this ping is seen, so are the step's
      await expect.poll(() => commands.includes('ping'), { timeout: 5_000 }).toBe(true);
      return commands.filter((c) => c !== 'ping');
    };
    const fenced = await counted(() =>
      fence.write(first!, undefined, { step: 'poll', createId: '' }, { ...next, polls: 1 }, { priority: 1 }),
    );
    const plain = await counted(async () => {
      await second!.updateData({ ...next, polls: 1 });
      await second!.changePriority({ priority: 1 });
    });
    monitor.stop();
    expect(fenced).toEqual(['evalsha']);
    expect(plain).toEqual(['evalsha', 'evalsha']);
    expect(await ctx.redis.hget(jobKeys(first!).hash, JOB_FIELDS.priority)).toBe('1');
  });
});
