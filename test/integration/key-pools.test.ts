// Pools of keys (docs/plans.md): a batch enqueued to a pool is served by every key of it, each at
// its own rate; a key that holds (here: its key expired) gives its waiting plates to the others,
// and no plate is created twice; two keys that are one quota upstream are said to be so, an
// independent one is not. Counted at the simulator, over real HTTP and real Redis.
import { afterEach, describe, expect, it } from 'vitest';
import { estimate, ingestList } from '../../src/producers/enqueue.js';
import type { Outcome } from '../../src/queue/types.js';
import { exportSourceFor } from '../../src/sinks/export.js';
import { accountKey, type Harness, makePlates, sleep, startHarness } from '../helpers/engine.js';

const POOL = [
  { id: 'k10', rateLimit: '10/s', key: { rateLimit: '10/s' }, fields: { pool: 'fleet' } },
  { id: 'k20', rateLimit: '20/s', key: { rateLimit: '20/s' }, fields: { pool: 'fleet' } },
  { id: 'k30', rateLimit: '30/s', key: { rateLimit: '30/s' }, fields: { pool: 'fleet' } },
  { id: 'solo', rateLimit: '20/s', key: { rateLimit: '20/s' } },
];

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function outcomes(batchId: string, home: string): Promise<Outcome[]> {
  const out: Outcome[] = [];
  for await (const o of h!.services.outcomes.scan({ id: batchId, account: home })) out.push(o);
  return out;
}

function byKey(list: readonly Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of list) counts[o.key ?? '(none)'] = (counts[o.key ?? '(none)'] ?? 0) + 1;
  return counts;
}

async function started(): Promise<Harness> {
  const harness = await startHarness({ label: 'pools', accounts: POOL, sim: { completionMs: [50, 150] } });
  for (const a of POOL)
    await harness.services.answers.learn(a.id, { id: '/body/queryId', status: '/body/status' }, Date.now());
  return harness;
}

/**
 * Keys learned from the headers (`auto`): q1 and q2 are one contract upstream, q3 its own (another
 * limit). Two independent keys with the same limit, both used to the full, agree on their
 * remainders and are told apart by drawing no 429s: that is test/unit/pools.test.ts's, on a clock
 * it owns (here, a loaded machine's stalls draw 429s from a key paced right).
 */
const CONTRACT = [
  { id: 'q1', rateLimit: 'auto', key: { rateLimit: '20/s' }, fields: { pool: 'contract' } },
  {
    id: 'q2',
    rateLimit: 'auto',
    key: { rateLimit: '20/s', sharesWith: accountKey('q1') },
    fields: { pool: 'contract' },
  },
  { id: 'q3', rateLimit: 'auto', key: { rateLimit: '10/s' }, fields: { pool: 'contract' } },
];

describe('pools of keys', () => {
  it('two keys that are one quota upstream are said to be so (log, status) and split it, independent keys are not; nothing paid twice', async () => {
    h = await startHarness({ label: 'pools-quota', accounts: CONTRACT, sim: { completionMs: [50, 150] } });
    for (const a of CONTRACT)
      await h.services.answers.learn(a.id, { id: '/body/queryId', status: '/body/status' }, Date.now());
    // Enough to keep the keys busy well past their first seconds: before a per-second window is
    // proven, a key spends only what the upstream says is left, so the shared quota's 429s (what
    // says "one quota") come once both keys pace at the limit each announces (about 50 creates in,
    // 4 s, on a quiet machine).
    const plates = makePlates(300);
    const { batch } = await ingestList(h.services, plates, { source: 'library', pool: 'contract' });
    let groups: string[][] = [];
    for (let i = 0; i < 300 && groups.length === 0; i++) {
      await sleep(100);
      groups = (await h.services.pools.states())[0]?.sharedQuota ?? [];
    }
    expect(groups.map((g) => [...g].sort())).toEqual([['q1', 'q2']]);
    const said = h.logs.lines.filter((l) => /look like one quota/.test(String(l.msg)));
    expect(said.length).toBeGreaterThanOrEqual(1);
    expect(String(said[0]!.msg)).toMatch(/keys q[12] and q[12] of pool contract look like one quota/);
    await h.waitForBatch(batch.id, 60_000);
    const stats = h.sim.stats();
    expect(stats.creates).toBe(plates.length);
    expect(stats.duplicateCreates).toBe(0);
    // Still only the two: q3's limit is its own.
    const after = (await h.services.pools.states())[0]!;
    expect(after.sharedQuota.map((g) => [...g].sort())).toEqual([['q1', 'q2']]);
    // Said, the two split the quota (lua/pace-learn) and stop fighting over it. Each paced at the
    // whole of it, they drew 69-285 429s over the batch in seven runs of twelve (the other five
    // never said it), one key most of them, up to 20 a second for 13 s; split once one of them is
    // refused ten times, 13-20 in nine.
    const refused = stats.byKey.q1!.rateLimited + stats.byKey.q2!.rateLimited;
    expect(refused, '429s drawn by the two keys of one quota').toBeLessThanOrEqual(60);
    console.log(
      `one quota said after ${said.length} line(s); requests by key ${JSON.stringify(
        Object.fromEntries(Object.entries(stats.byKey).map(([k, v]) => [k, [v.counted, v.rateLimited]])),
      )}`,
    );
  });

  it('a pooled batch is served by every key of the pool, each plate created once, its key in its outcome', async () => {
    h = await started();
    const plates = makePlates(240);
    const { batch } = await ingestList(h.services, plates, { source: 'library', pool: 'fleet' });
    expect(batch.account).toBe('k10');
    expect(batch.pool).toEqual({ name: 'fleet', keys: ['k20', 'k30'] });
    await h.waitForBatch(batch.id, 40_000);
    const stats = h.sim.stats();
    expect(stats.creates, 'one create a plate at the simulator').toBe(plates.length);
    expect(stats.duplicateCreates).toBe(0);
    const list = await outcomes(batch.id, 'k10');
    expect(list).toHaveLength(plates.length);
    const counts = byKey(list);
    console.log(`240 plates over keys at 10, 20 and 30/s: ${JSON.stringify(counts)}`);
    // Every key took part, the faster more than the slowest; the account outside the pool none.
    for (const key of ['k10', 'k20', 'k30']) expect(counts[key], key).toBeGreaterThan(10);
    expect(counts.k30!).toBeGreaterThan(counts.k10!);
    expect(counts.solo).toBeUndefined();
    expect(stats.byKey.solo?.counted ?? 0).toBe(0);
  });

  it('a key that expires mid-batch: the others carry its waiting plates, none created twice, the batch finishes', async () => {
    h = await started();
    const plates = makePlates(400);
    const { batch } = await ingestList(h.services, plates, { source: 'library', pool: 'fleet' });
    for (let i = 0; i < 200 && h.sim.stats().creates < 100; i++) await sleep(50);
    expect(h.sim.keys.expire(accountKey('k30'))).toBe(true);
    const expiredAt = h.sim.stats().creates;
    // The others finish every plate the expired key had not created; its own queries wait for it.
    const deadline = Date.now() + 40_000;
    for (;;) {
      const counts = (await h.services.batchViews.get(batch.id)).counts;
      const left = await h.services.inflight.count('k30');
      if (counts.done + counts.failed + left >= plates.length) break;
      if (Date.now() > deadline) {
        const jobs = await h.services.accounts.queue('k30').getJobCounts();
        const staged = await h.redis.redis.zrange(h.services.keys.staged('k30'), 0, '-1');
        const waiting = await h.services.accounts.queue('k30').getJobs(['wait', 'prioritized', 'delayed', 'active']);
        throw new Error(
          `not carried on: ${JSON.stringify(counts)}, ${left} with k30 ${JSON.stringify(jobs)} staged ${staged} ${JSON.stringify(waiting.map((j) => j.data))}`,
        );
      }
      await sleep(100);
    }
    const line = await h.services.accounts.line('k30').state();
    expect(line.pause?.code).toBe('EXPIRED_API_KEY');
    // The jobs that waited in the worker for k30's slots went back at its first 401, unsent: the
    // expired key was not asked again, once a slot each (before: 8 refused requests; now 1, or
    // the few already past their slot when the first answer came).
    const refused = h.sim.stats().responsesByStatus['401'] ?? 0;
    console.log(`requests refused for the expired key: ${refused}`);
    expect(refused).toBeLessThanOrEqual(3);
    // The key is renewed and the account resumed: its queries are polled by it (never created again).
    h.sim.keys.add({ key: accountKey('k30'), label: 'k30', rateLimit: '30/s' });
    await h.services.accounts.line('k30').resume();
    await h.waitForBatch(batch.id, 30_000);
    const stats = h.sim.stats();
    expect(stats.creates, 'one create a plate at the simulator').toBe(plates.length);
    expect(stats.duplicateCreates).toBe(0);
    const list = await outcomes(batch.id, 'k10');
    expect(list).toHaveLength(plates.length);
    expect(list.filter((o) => o.status !== 'done')).toEqual([]);
    const counts = byKey(list);
    console.log(`400 plates, k30 expired after ${expiredAt} creates: ${JSON.stringify(counts)}`);
    expect(counts['(none)']).toBeUndefined();
    expect(counts.k10! + counts.k20!).toBeGreaterThan(400 - expiredAt);
    // The exports name each plate's key (the account, never its secret).
    const source = await exportSourceFor(h.services, { id: batch.id, account: 'k10' });
    const keys: (string | undefined)[] = [];
    for await (const row of source.rows()) keys.push(row.key);
    expect(keys).toHaveLength(plates.length);
    expect(new Set(keys)).toEqual(new Set(['k10', 'k20', 'k30']));
    expect(JSON.stringify(keys)).not.toContain(accountKey('k30'));
  });

  it('a pooled batch is planned at the sum of its serving keys: the dry run and its deadline line; none serving: why', async () => {
    h = await started();
    const plates = makePlates(600);
    const input = { plates, source: 'library' as const };
    // 600 plates at ~2.15 requests each: ~22 s at the pool's 60/s, ~129 s at its first key's 10/s.
    const due = new Date(Date.now() + 60_000).toISOString();
    const pooled = await estimate(h.services, input, { pool: 'fleet', deadline: due });
    expect(pooled.ratePerSecond).toBe(60);
    expect(pooled.deadline?.feasibility).toBe('feasible');
    const alone = await estimate(h.services, input, { account: 'k10', deadline: due });
    expect(alone.ratePerSecond).toBe(10);
    expect(alone.deadline?.feasibility).toBe('not feasible');
    // A key that holds serves none: the pool is planned at the others' 30/s.
    await h.services.accounts.line('k30').pause('EXPIRED_API_KEY', 'expired in the test');
    const short = await estimate(h.services, input, { pool: 'fleet', deadline: due });
    expect(short.ratePerSecond).toBe(30);
    expect(short.secondsAtRate).toBeGreaterThan(pooled.secondsAtRate * 1.9);
    // Every key holds: no rate, and the line says why (not "before first contact").
    await h.services.accounts.line('k10').pause('INSUFFICIENT_PERMISSIONS', 'in the test');
    await h.services.accounts.line('k20').pause('EXPIRED_API_KEY', 'in the test');
    const none = await estimate(h.services, input, { pool: 'fleet', deadline: due });
    expect(none.deadline?.feasibility).toBe('unknown');
    expect(none.deadline?.held).toEqual([
      { account: 'k10', why: 'INSUFFICIENT_PERMISSIONS' },
      { account: 'k20', why: 'EXPIRED_API_KEY' },
      { account: 'k30', why: 'EXPIRED_API_KEY' },
    ]);
    expect(none.deadline?.line).toMatch(
      /^deadline: unknown — due .*; no key serves it now: known after one of its keys/,
    );
    expect(none.deadline?.line).toContain('k10 INSUFFICIENT_PERMISSIONS, k20 EXPIRED_API_KEY, k30 EXPIRED_API_KEY');
    expect(none.deadline?.line).not.toContain('first contact');
    expect(h.sim.stats().requests, 'a dry run sends nothing').toBe(0);
  });

  it('a batch to an unknown pool, or to an account outside the pool: a typed error, nothing stored or paid', async () => {
    h = await started();
    await expect(ingestList(h.services, makePlates(5), { source: 'library', pool: 'nope' })).rejects.toMatchObject({
      code: 'POOL_NOT_FOUND',
    });
    await expect(
      ingestList(h.services, makePlates(5), { source: 'library', pool: 'fleet', account: 'solo' }),
    ).rejects.toMatchObject({ code: 'POOL_NOT_FOUND' });
    await sleep(300);
    expect(h.sim.stats().requests).toBe(0);
    expect((await h.services.batches.refs(0, 10)).total).toBe(0);
  });
});
