// The move from the old single-slot key layout to one slot per account (src/redis/layout.ts), on a
// real Redis and a real 3-master Redis Cluster: data written by the old names (BullMQ queues
// opened the old way, vqb's structures by their old key names) is found under the new names with
// the same content and TTLs, BullMQ opened the new way sees the same jobs, what stays stays, and
// the move happens once however many processes start at once.
import { randomBytes } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { deleteKeysByPrefix, type RedisClient, serversOf } from '../../src/redis/connection.js';
import { accountQueueName, barePrefix, deploymentPatterns, VqbKeys } from '../../src/redis/keys.js';
import { checkLayout, migrateLayout } from '../../src/redis/layout.js';
import { withScripts } from '../../src/redis/scripts.js';
import { waitFor } from '../helpers/process.js';
import { REDIS_URL } from '../helpers/redis.js';
import { startCluster, type TestCluster } from '../helpers/redis-topology.js';

const QUEUE = 'plates';
const DAY = '20261125';
const MONTH = '202611';

interface Deployment {
  settings: { prefix: string; queueName: string };
  keys: VqbKeys;
  /** The old global base, `<prefix>:<queue>:vqb`. */
  G: string;
}

function deployment(): Deployment {
  const prefix = `{vqbt-layout-${randomBytes(4).toString('hex')}}`;
  const settings = { prefix, queueName: QUEUE };
  return { settings, keys: new VqbKeys(settings), G: `${prefix}:${QUEUE}:vqb` };
}

interface Snapshot {
  type: string;
  value: unknown;
  pttl: number;
}

/** A key's type, content (in a form toEqual compares) and PTTL. */
async function snapshot(redis: RedisClient, key: string): Promise<Snapshot> {
  const type = await redis.type(key);
  const pttl = await redis.pttl(key);
  switch (type) {
    case 'string':
      return { type, value: await redis.get(key), pttl };
    case 'hash':
      return { type, value: await redis.hgetall(key), pttl };
    case 'list':
      return { type, value: await redis.lrange(key, 0, -1), pttl };
    case 'zset':
      return { type, value: await redis.zrange(key, 0, '-1', 'WITHSCORES'), pttl };
    case 'set':
      return { type, value: (await redis.smembers(key)).sort(), pttl };
    case 'stream':
      return { type, value: await redis.xrange(key, '-', '+'), pttl };
    default:
      return { type, value: null, pttl };
  }
}

async function scanAll(redis: RedisClient, match: string): Promise<string[]> {
  const found: string[] = [];
  for (const server of serversOf(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await server.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
  }
  return [...new Set(found)].sort();
}

/** An old-layout BullMQ queue of `account` with jobs in every state vqb's queues hold. */
async function oldAccountQueue(connection: RedisClient, d: Deployment, account: string): Promise<void> {
  const name = `${QUEUE}.${account}`;
  const queue = new Queue(name, { connection, prefix: d.settings.prefix });
  await queue.add('plate', { plate: 'AAA0A01', batchId: 'b1' }, { jobId: 'c1' });
  await queue.add('plate', { plate: 'AAA0A02', batchId: 'b1' }, { jobId: 'w1' });
  await queue.add('plate', { plate: 'AAA0A03', batchId: 'b1' }, { jobId: 'w2' });
  await queue.add('plate', { plate: 'AAA0A04', batchId: 'b1' }, { jobId: 'p1', priority: 5 });
  await queue.add('plate', { plate: 'AAA0A05', batchId: 'b1' }, { jobId: 'd1', delay: 600_000 });
  // One job completed, one active (with its lock, a key with a TTL), taken by hand.
  const worker = new Worker(name, null, { connection, prefix: d.settings.prefix, lockDuration: 600_000 });
  const c1 = await worker.getNextJob('token-1');
  expect(c1?.id).toBe('c1');
  await c1!.moveToCompleted('done', 'token-1', false);
  const w1 = await worker.getNextJob('token-2');
  expect(w1?.id).toBe('w1');
  await worker.close();
  await queue.close();
}

/** vqb's own structures by their old names: every one that moves, and the ones that stay. */
async function oldVqbKeys(redis: RedisClient, G: string): Promise<void> {
  const writes: Promise<unknown>[] = [
    // Batches: b1 and bulk of acme, b2 of the account named `batch`, legacy from before accounts.
    redis.hset(`${G}:batch:b1`, { id: 'b1', account: 'acme', name: 'first', priority: 'normal', weight: '2' }),
    redis.rpush(`${G}:batch:b1:rows`, 'r1', 'r2', 'r3'),
    redis.hset(`${G}:batch:b1:outcomes`, { AAA0A01: '{"status":"done"}', AAA0A09: '{"status":"failed"}' }),
    redis.set(`${G}:batch:b1:ingest`, 'holder-1', 'PX', 120_000),
    redis.hset(`${G}:batch:b1:webhooks`, { 'evt-1': '{"attempts":1}' }),
    redis.hset(`${G}:batch:b2`, { id: 'b2', account: 'batch', name: 'second' }),
    redis.rpush(`${G}:batch:b2:rows`, 'x1'),
    redis.hset(`${G}:batch:b2:outcomes`, { BBB0B01: '{"status":"done"}' }),
    redis.hset(`${G}:batch:bulk`, { id: 'bulk', account: 'acme', name: 'named like a class' }),
    redis.hset(`${G}:batch:legacy`, { id: 'legacy', name: 'before accounts' }),
    redis.rpush(`${G}:batch:legacy:rows`, 'l1', 'l2'),
    redis.zadd(`${G}:batches`, 1, 'b1', 2, 'b2', 3, 'bulk', 4, 'legacy'),
    // Lines, paces, holds.
    redis.hset(`${G}:account:acme`, { paused: '0', heldUntil: '0' }),
    redis.hset(`${G}:account:acme:pace`, { next: '1764000000000' }),
    redis.set(`${G}:account:acme:hold`, '1764000060000', 'PX', 90_000),
    redis.hset(`${G}:account:batch`, { paused: '1' }),
    // In flight.
    redis.zadd(`${G}:inflight:acme`, 1764000000000, 'b1|AAA0A02'),
    redis.hset(`${G}:inflight:acme:batches`, { b1: '1' }),
    redis.zadd(`${G}:inflight:batch`, 1764000000001, 'b2|BBB0B02'),
    // Scheduling: classes, staged, pending lists, and an account named `pending` whose class
    // zset `sched:pending:normal` has the shape of batch `normal`'s pending list.
    redis.zadd(`${G}:sched:acme:normal`, 1, 'b1'),
    redis.zadd(`${G}:sched:acme:bulk`, 1, 'bulk'),
    redis.zadd(`${G}:sched:batch:bulk`, 1, 'b2'),
    redis.zadd(`${G}:sched:acme:staged`, 1764000000000, 'b1|AAA0A06'),
    redis.rpush(`${G}:sched:pending:b1`, 'AAA0A07', 'AAA0A08'),
    redis.rpush(`${G}:sched:pending:b2`, 'BBB0B03'),
    redis.rpush(`${G}:sched:pending:bulk`, 'CCC0C01'),
    redis.zadd(`${G}:sched:pending:normal`, 7, 'p-batch'),
    redis.hset(`${G}:sched:weights`, { b1: '2', b2: '1', bulk: '3' }),
    redis.zadd(`${G}:sched:active`, 1764000000000, 'acme', 1764000000500, 'batch'),
    // Spend (expiring), budgets (an account named `batch` and batch budgets), costs.
    redis.set(`${G}:spend:acme:d:${DAY}`, '1250', 'PX', 2 * 86_400_000),
    redis.set(`${G}:spend:acme:m:${MONTH}`, '9900', 'PX', 40 * 86_400_000),
    redis.set(`${G}:spend:batch:d:${DAY}`, '10', 'PX', 2 * 86_400_000),
    redis.hset(`${G}:budget:acme`, { daily: '5000' }),
    redis.hset(`${G}:budget:batch`, { daily: '100' }),
    redis.hset(`${G}:budget:batch:b1`, { cap: '700' }),
    redis.hset(`${G}:budget:batch:b2`, { cap: '70' }),
    redis.hset(`${G}:cost:batch:b1`, { creates: '3', polls: '5' }),
    redis.hset(`${G}:cost:batch:b2`, { creates: '1' }),
    // What stays where it is.
    redis.hset(`${G}:cost:${DAY}`, { creates: '4', polls: '5' }),
    redis.hset(`${G}:learn:carro`, { p50: '1200' }),
    redis.set(`${G}:reuse:AAA0A01`, 'b1', 'PX', 3_600_000),
    redis.hset(`${G}:inbox:main`, { cursor: '17' }),
    redis.hset(`${G}:console:session:abc123`, { user: 'ops' }),
    redis.set(`${G}:console:upload:u1`, 'staged', 'PX', 600_000),
    redis.zadd(`${G}:workers`, 1764000000000, 'host:1'),
    redis.set(`${G}:retention:lock`, 'sweeper', 'PX', 300_000),
  ];
  await Promise.all(writes);
}

/** Every old vqb key that moves, and its new name. */
function vqbMoves(d: Deployment): [string, string][] {
  const { keys, G } = d;
  const b1 = { id: 'b1', account: 'acme' };
  const b2 = { id: 'b2', account: 'batch' };
  const bulk = { id: 'bulk', account: 'acme' };
  const legacy = { id: 'legacy', account: 'default' };
  return [
    [`${G}:batch:b1`, keys.batch(b1)],
    [`${G}:batch:b1:rows`, keys.rows(b1)],
    [`${G}:batch:b1:outcomes`, keys.outcomes(b1)],
    [`${G}:batch:b1:ingest`, keys.ingestLock(b1)],
    [`${G}:batch:b1:webhooks`, keys.batchWebhooks(b1)],
    [`${G}:batch:b2`, keys.batch(b2)],
    [`${G}:batch:b2:rows`, keys.rows(b2)],
    [`${G}:batch:b2:outcomes`, keys.outcomes(b2)],
    [`${G}:batch:bulk`, keys.batch(bulk)],
    [`${G}:batch:legacy`, keys.batch(legacy)],
    [`${G}:batch:legacy:rows`, keys.rows(legacy)],
    [`${G}:account:acme`, keys.account('acme')],
    [`${G}:account:acme:pace`, keys.pace('acme')],
    [`${G}:account:acme:hold`, keys.paceHold('acme')],
    [`${G}:account:batch`, keys.account('batch')],
    [`${G}:inflight:acme`, keys.inflight('acme')],
    [`${G}:inflight:acme:batches`, keys.inflightByBatch('acme')],
    [`${G}:inflight:batch`, keys.inflight('batch')],
    [`${G}:sched:acme:normal`, keys.schedClass('acme', 'normal')],
    [`${G}:sched:acme:bulk`, keys.schedClass('acme', 'bulk')],
    [`${G}:sched:batch:bulk`, keys.schedClass('batch', 'bulk')],
    [`${G}:sched:acme:staged`, keys.staged('acme')],
    [`${G}:sched:pending:b1`, keys.pending(b1)],
    [`${G}:sched:pending:b2`, keys.pending(b2)],
    [`${G}:sched:pending:bulk`, keys.pending(bulk)],
    [`${G}:sched:pending:normal`, keys.schedClass('pending', 'normal')],
    [`${G}:spend:acme:d:${DAY}`, keys.spendDay('acme', DAY)],
    [`${G}:spend:acme:m:${MONTH}`, keys.spendMonth('acme', MONTH)],
    [`${G}:spend:batch:d:${DAY}`, keys.spendDay('batch', DAY)],
    [`${G}:budget:acme`, keys.budget('acme')],
    [`${G}:budget:batch`, keys.budget('batch')],
    [`${G}:budget:batch:b1`, keys.batchBudget(b1)],
    [`${G}:budget:batch:b2`, keys.batchBudget(b2)],
    [`${G}:cost:batch:b1`, keys.batchCosts(b1)],
    [`${G}:cost:batch:b2`, keys.batchCosts(b2)],
  ];
}

function staying(d: Deployment): string[] {
  const { G } = d;
  return [
    `${G}:batches`,
    `${G}:cost:${DAY}`,
    `${G}:learn:carro`,
    `${G}:reuse:AAA0A01`,
    `${G}:inbox:main`,
    `${G}:console:session:abc123`,
    `${G}:console:upload:u1`,
    `${G}:workers`,
    `${G}:retention:lock`,
  ];
}

interface Seeded {
  /** old key → new key, for every key that moves whole (BullMQ's and vqb's). */
  moves: [string, string][];
  before: Map<string, Snapshot>;
  /** Keys that stay (vqb's and the webhook deliveries' queue), with their content. */
  stays: Map<string, Snapshot>;
  counts: Record<string, Record<string, number>>;
}

/** Writes a whole old-layout deployment and records what each key holds. */
async function seed(redis: RedisClient, d: Deployment, accounts = ['acme', 'batch']): Promise<Seeded> {
  const { prefix } = d.settings;
  for (const account of accounts) await oldAccountQueue(redis, d, account);
  const webhooks = new Queue(`${QUEUE}.webhooks`, { connection: redis, prefix });
  await webhooks.add('deliver', { url: 'https://example.test/hook' }, { jobId: 'h1' });
  await webhooks.close();
  await oldVqbKeys(redis, d.G);

  const moves = vqbMoves(d);
  for (const account of accounts) {
    const { name, prefix: bare } = accountQueueName(d.settings, account);
    const oldPrefix = `${prefix}:${QUEUE}.${account}:`;
    for (const key of await scanAll(redis, `${oldPrefix}*`))
      moves.push([key, `${bare}:${name}:${key.slice(oldPrefix.length)}`]);
  }
  const before = new Map<string, Snapshot>();
  for (const [from] of moves) before.set(from, await snapshot(redis, from));
  const stays = new Map<string, Snapshot>();
  for (const key of [...staying(d), ...(await scanAll(redis, `${prefix}:${QUEUE}.webhooks:*`))])
    stays.set(key, await snapshot(redis, key));
  const counts: Record<string, Record<string, number>> = {};
  for (const account of accounts) {
    const queue = new Queue(`${QUEUE}.${account}`, { connection: redis, prefix });
    counts[account] = await queue.getJobCounts();
    await queue.close();
  }
  return { moves, before, stays, counts };
}

/** Every moved key holds exactly what its old key held, with its TTL; every old key is gone; what stays is untouched. */
async function expectMoved(redis: RedisClient, d: Deployment, s: Seeded): Promise<void> {
  const { keys, G } = d;
  for (const [from, to] of s.moves) {
    expect(await redis.exists(from), `${from} is gone`).toBe(0);
    const old = s.before.get(from)!;
    const now = await snapshot(redis, to);
    expect({ key: to, type: now.type, value: now.value }).toEqual({ key: to, type: old.type, value: old.value });
    if (old.pttl < 0) expect(now.pttl, `${to} has no TTL`).toBe(-1);
    else {
      expect(now.pttl, `${to} keeps its TTL`).toBeGreaterThan(old.pttl - 30_000);
      expect(now.pttl).toBeLessThanOrEqual(old.pttl);
    }
  }
  for (const [key, old] of s.stays) {
    const now = await snapshot(redis, key);
    expect({ key, type: now.type, value: now.value }).toEqual({ key, type: old.type, value: old.value });
  }
  // The split and rebuilt structures.
  expect(await redis.exists(`${G}:sched:weights`)).toBe(0);
  expect(await redis.exists(`${G}:sched:active`)).toBe(0);
  expect(await redis.hgetall(keys.schedWeights('acme'))).toEqual({ b1: '2', bulk: '3' });
  expect(await redis.hgetall(keys.schedWeights('batch'))).toEqual({ b2: '1' });
  expect(await redis.hgetall(keys.batchAccounts)).toEqual({
    b1: 'acme',
    b2: 'batch',
    bulk: 'acme',
    legacy: 'default',
  });
  expect(await redis.hgetall(keys.schedActiveFlag('acme'))).toEqual({ on: '1', gen: '1' });
  expect(await redis.hgetall(keys.schedActiveFlag('batch'))).toEqual({ on: '1', gen: '1' });
  expect(await redis.zrange(keys.schedActive, 0, '-1', 'WITHSCORES')).toEqual(['acme', '1', 'batch', '1']);
  expect(await redis.get(keys.layout)).toBe('2');
  expect(await redis.exists(`${keys.layout}:lock`)).toBe(0);
  // Nothing else is left under the old names.
  const left = await scanAll(redis, `${d.settings.prefix}:*`);
  const allowed = new Set([
    ...s.stays.keys(),
    keys.batchAccounts,
    keys.schedActive,
    keys.layout,
    // The webhook deliveries' queue may have written since it was recorded (its own events).
    ...left.filter((k) => k.startsWith(`${d.settings.prefix}:${QUEUE}.webhooks:`)),
  ]);
  expect(left.filter((k) => !allowed.has(k))).toEqual([]);
}

/** BullMQ opened the new way sees the same jobs, in the same states, and can go on with them. */
async function expectQueues(redis: RedisClient, d: Deployment, s: Seeded): Promise<void> {
  for (const [account, counts] of Object.entries(s.counts)) {
    const { name, prefix } = accountQueueName(d.settings, account);
    const queue = new Queue(name, { connection: redis, prefix });
    expect(await queue.getJobCounts()).toEqual(counts);
    for (const [id, state, plate] of [
      ['c1', 'completed', 'AAA0A01'],
      ['w1', 'active', 'AAA0A02'],
      ['w2', 'waiting', 'AAA0A03'],
      ['p1', 'prioritized', 'AAA0A04'],
      ['d1', 'delayed', 'AAA0A05'],
    ] as const) {
      const job = await queue.getJob(id);
      expect(job?.data, `${account}/${id}`).toEqual({ plate, batchId: 'b1' });
      expect(await job!.getState(), `${account}/${id}`).toBe(state);
    }
    // The active job's lock moved with it: its holder can still finish it.
    const w1 = await queue.getJob('w1');
    await w1!.moveToCompleted('done', 'token-2', false);
    expect(await queue.getCompletedCount()).toBe(2);
    // And the queue takes new jobs and hands out waiting ones.
    await queue.add('plate', { plate: 'AAA0A10', batchId: 'b1' }, { jobId: 'n1' });
    const worker = new Worker(name, null, { connection: redis, prefix });
    expect((await worker.getNextJob('token-3'))?.id).toBe('w2');
    await worker.close();
    await queue.close();
  }
  const webhooks = new Queue(`${QUEUE}.webhooks`, { connection: redis, prefix: d.settings.prefix });
  expect((await webhooks.getJob('h1'))?.data).toEqual({ url: 'https://example.test/hook' });
  await webhooks.close();
}

describe('key layout migration (standalone Redis)', () => {
  let redis: Redis;
  const used: Deployment[] = [];
  const fresh = () => {
    const d = deployment();
    used.push(d);
    return d;
  };

  beforeAll(() => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  });

  afterEach(async () => {
    for (const d of used.splice(0))
      for (const pattern of deploymentPatterns(d.settings.prefix))
        await deleteKeysByPrefix(redis, pattern.replace(/\*$/, ''));
  });

  afterAll(async () => {
    await redis.quit();
  });

  it('moves every old key to its new name with its content and TTL; BullMQ sees the same jobs; what stays stays', async () => {
    const d = fresh();
    const s = await seed(redis, d);
    const lines: { msg: string; fields?: object }[] = [];
    const started = Date.now();
    const result = await migrateLayout(redis, d.keys, d.settings, (msg, fields) =>
      lines.push({ msg, ...(fields ? { fields } : {}) }),
    );
    const ms = Date.now() - started;
    // Every key that moves whole, plus the weights split and the active set rebuilt.
    expect(result).toEqual({ moved: s.moves.length + 2, alreadyCurrent: false });
    console.log(`layout migration: ${result.moved} keys moved in ${ms} ms`);
    expect(lines).toHaveLength(2);
    expect(lines[0]!.msg).toMatch(/moving/);
    expect(lines[1]!.msg).toMatch(/layout 2/);
    expect(lines[1]!.fields).toMatchObject({ moved: result.moved, ms: expect.any(Number) });

    await expectMoved(redis, d, s);
    await expectQueues(redis, d, s);

    // The next start: one GET, nothing to do.
    const again = await migrateLayout(redis, d.keys, d.settings, (msg) => lines.push({ msg }));
    expect(again).toEqual({ moved: 0, alreadyCurrent: true });
    expect(lines).toHaveLength(2);
  });

  it('two processes starting at once: both resolve, the data moves once', async () => {
    const d = fresh();
    const s = await seed(redis, d);
    const other = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    try {
      const results = await Promise.all([
        migrateLayout(redis, d.keys, d.settings),
        migrateLayout(other, d.keys, d.settings),
      ]);
      expect(results.map((r) => r.moved).sort((a, b) => a - b)).toEqual([0, s.moves.length + 2]);
      expect(results.filter((r) => r.alreadyCurrent)).toHaveLength(1);
    } finally {
      await other.quit();
    }
    await expectMoved(redis, d, s);
    await expectQueues(redis, d, s);
  });

  it('a start never moves data: the old layout, or a move cut off, is LAYOUT_MIGRATION_NEEDED naming `vqb migrate`; after it, one GET', async () => {
    const d = fresh();
    await seed(redis, d);
    const refusal = await checkLayout(redis, d.keys, d.settings).catch((e: unknown) => e);
    expect(refusal).toMatchObject({ code: 'LAYOUT_MIGRATION_NEEDED' });
    expect(String((refusal as Error).message)).toContain('vqb migrate');
    // Nothing moved, nothing marked.
    expect(await redis.get(d.keys.layout)).toBeNull();
    expect(await redis.exists(`${d.settings.prefix}:${QUEUE}:vqb:batches`)).toBe(1);
    // A move cut off (its lock left behind) is refused too, until `vqb migrate` finishes it.
    await redis.set(`${d.keys.layout}:lock`, 'someone', 'PX', 60_000);
    await expect(checkLayout(redis, d.keys, d.settings)).rejects.toMatchObject({ code: 'LAYOUT_MIGRATION_NEEDED' });
    await redis.del(`${d.keys.layout}:lock`);
    await migrateLayout(redis, d.keys, d.settings);
    await expect(checkLayout(redis, d.keys, d.settings)).resolves.toBeUndefined();
  });

  it('a start on a Redis with nothing of vqb marks it layout 2 at once', async () => {
    const d = fresh();
    await checkLayout(redis, d.keys, d.settings);
    expect(await redis.get(d.keys.layout)).toBe('2');
  });

  it('a fresh deployment: layout 2 at once, nothing logged', async () => {
    const d = fresh();
    const lines: string[] = [];
    expect(await migrateLayout(redis, d.keys, d.settings, (msg) => lines.push(msg))).toEqual({
      moved: 0,
      alreadyCurrent: false,
    });
    expect(await redis.get(d.keys.layout)).toBe('2');
    expect(lines).toEqual([]);
  });

  it('resumes a migration cut off between RESTORE and DEL: the new copy is kept, the old key deleted', async () => {
    const d = fresh();
    const { G, keys } = d;
    const b1 = { id: 'b1', account: 'acme' };
    await redis.hset(`${G}:batch:b1`, { id: 'b1', account: 'acme' });
    await redis.zadd(`${G}:batches`, 1, 'b1');
    await redis.rpush(`${G}:batch:b1:rows`, 'old-1');
    // The earlier run stored the copy (and the batch's account) and stopped before deleting the old key.
    await redis.hset(keys.batchAccounts, 'b1', 'acme');
    await redis.rpush(keys.rows(b1), 'copied-1');
    const result = await migrateLayout(redis, keys, d.settings);
    expect(result).toEqual({ moved: 2, alreadyCurrent: false });
    expect(await redis.exists(`${G}:batch:b1:rows`, `${G}:batch:b1`)).toBe(0);
    expect(await redis.lrange(keys.rows(b1), 0, -1)).toEqual(['copied-1']);
    expect(await redis.hgetall(keys.batch(b1))).toEqual({ id: 'b1', account: 'acme' });
  });

  it('the lock is refreshed while a long migration runs; a migration that loses it stops, and the next one finishes the move', async () => {
    const d = fresh();
    // Enough keys for a few seconds of moving (about 100,000 a second on this 2-core machine): the
    // lock is taken away after its first refresh, a third of a second in.
    const jobs = 300_000;
    for (let i = 0; i < jobs; i += 5000) {
      const p = redis.pipeline();
      for (let j = i; j < i + 5000; j++)
        p.hset(`${d.settings.prefix}:${QUEUE}.acme:${j}`, { name: 'plate', data: `{"n":${j}}` });
      await p.exec();
    }
    const lockKey = `${d.keys.layout}:lock`;
    const { name, prefix: bare } = accountQueueName(d.settings, 'acme');
    let settled: string | false = false;
    // Refreshed every third of its life: each refresh shows as the lock's time to live going back up.
    const run = migrateLayout(redis, d.keys, d.settings, undefined, { lockMs: 1_000 });
    run.then(
      (r) => (settled = `finished: ${JSON.stringify(r)}`),
      (err: Error) => (settled = `failed: ${err.message}`),
    );
    let last = Number.POSITIVE_INFINITY;
    let refreshed = false;
    while (!settled && !refreshed) {
      const ttl = await redis.pttl(lockKey);
      if (ttl > 0 && ttl > last + 50) refreshed = true;
      if (ttl > 0) last = ttl;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(settled, 'the migration is still running').toBe(false);
    expect(refreshed).toBe(true);
    // Another process takes over the lock (as if this one had stalled past it): this one stops.
    await redis.set(lockKey, 'someone-else', 'PX', 60_000);
    await expect(run).rejects.toThrow(/lost the key layout lock/);
    expect(await redis.get(d.keys.layout)).toBeNull();
    expect(await redis.get(lockKey)).toBe('someone-else');

    await redis.del(lockKey);
    const rest = await migrateLayout(redis, d.keys, d.settings);
    expect(rest.moved).toBeGreaterThan(0);
    expect(rest.moved).toBeLessThan(jobs);
    expect(await scanAll(redis, `${d.settings.prefix}:${QUEUE}.acme:*`)).toEqual([]);
    expect(await scanAll(redis, `${bare}:${name}:*`)).toHaveLength(jobs);
    expect(await redis.hgetall(`${bare}:${name}:${jobs - 1}`)).toEqual({ name: 'plate', data: `{"n":${jobs - 1}}` });
    // 300,000 keys written and moved twice: 20-40 s alone, past a minute beside the browser tests.
  }, 180_000);

  it('another process holds the lock: waits for its release as a message, and gives up after waitMs', async () => {
    const d = fresh();
    await redis.hset(`${d.G}:account:acme`, { paused: '0' });
    await redis.set(`${d.keys.layout}:lock`, 'someone-else', 'PX', 60_000);
    await expect(migrateLayout(redis, d.keys, d.settings, undefined, { waitMs: 300 })).rejects.toThrow(
      /another process/,
    );
    expect(await redis.exists(`${d.G}:account:acme`)).toBe(1);

    // The holder finishes as a migrator does: the layout written, then its release published. The
    // waiter has no timer before the lock's expiry (60 s, past this test's timeout): only the
    // message ends its wait. It listens once it has SUBSCRIBEd (the channel's one subscriber).
    const waiting = migrateLayout(redis, d.keys, d.settings);
    await waitFor(async () => (await redis.pubsub('NUMSUB', d.keys.layoutUnlocked))[1] === 1);
    await redis.set(d.keys.layout, '2');
    const release = withScripts(redis, ['lock-release']);
    expect(await release.vqbLockRelease(`${d.keys.layout}:lock`, 'someone-else', d.keys.layoutUnlocked)).toBe(1);
    expect(await waiting).toEqual({ moved: 0, alreadyCurrent: true });
    // Its listening connection is closed after the wait.
    await waitFor(async () => (await redis.pubsub('NUMSUB', d.keys.layoutUnlocked))[1] === 0);
  }, 20_000);
});

describe('key layout migration (Redis Cluster, 3 masters)', () => {
  let cluster: TestCluster;
  let client: Cluster;

  beforeAll(async () => {
    cluster = await startCluster(3);
    client = new Cluster(
      cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
      { scaleReads: 'master', redisOptions: { maxRetriesPerRequest: null } },
    );
    client.on('error', () => {});
  }, 60_000);

  afterAll(async () => {
    await client?.quit();
    await cluster?.close();
  });

  it("old data in the prefix's one slot moves to the accounts' slots, on their masters; nothing is lost", async () => {
    const d = deployment();
    const bare = barePrefix(d.settings.prefix);
    const oldSlot = await cluster.slotOf(d.settings.prefix);
    const oldOwner = await cluster.ownerOf(oldSlot);

    const s = await seed(client, d);
    // Before: every key of the deployment is on the prefix's master.
    for (const node of cluster.nodes)
      expect((await node.redis.keys(`${d.settings.prefix}:*`)).length > 0).toBe(node === oldOwner);

    const started = Date.now();
    const result = await migrateLayout(client, d.keys, d.settings);
    console.log(`layout migration (cluster): ${result.moved} keys moved in ${Date.now() - started} ms`);
    expect(result).toEqual({ moved: s.moves.length + 2, alreadyCurrent: false });
    await expectMoved(client, d, s);
    await expectQueues(client, d, s);

    // Each account's keys sit on the master that owns its slot.
    const owners = new Map<string, number>();
    for (const account of ['acme', 'batch', 'default', 'pending']) {
      const slot = await cluster.slotOf(d.keys.accountTag(account));
      const owner = await cluster.ownerOf(slot);
      owners.set(account, owner.port);
      const onOwner = await owner.redis.keys(`${bare}:{${QUEUE}.${account}}:*`);
      expect(onOwner.length, account).toBeGreaterThan(0);
      for (const key of onOwner) expect(await cluster.slotOf(key)).toBe(slot);
      for (const node of cluster.nodes)
        if (node !== owner) expect(await node.redis.keys(`${bare}:{${QUEUE}.${account}}:*`)).toEqual([]);
    }
    // plates.acme is slot 4457, plates.batch 9176, plates.default 12127: one in each third of the
    // slots, which is how `redis-cli --cluster create` splits them over 3 masters.
    expect(new Set([owners.get('acme'), owners.get('batch'), owners.get('default')]).size).toBe(3);

    expect(await migrateLayout(client, d.keys, d.settings)).toEqual({ moved: 0, alreadyCurrent: true });
  });
});
