// Compact storage: outcomes and reuse entries are packed (src/redis/compact.ts), and what was stored
// as plain JSON before still reads the same through every reader.
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeOutcome, OutcomeStore } from '../../src/queue/batch/outcomes.js';
import { ReuseStore } from '../../src/queue/reuse.js';
import type { Outcome } from '../../src/queue/types.js';
import { pack, unpack } from '../../src/redis/compact.js';
import { VqbKeys } from '../../src/redis/keys.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

let ctx: RedisTestContext | undefined;
afterEach(async () => {
  await ctx?.cleanup();
  ctx = undefined;
});

function outcome(plate: string, extra: Partial<Outcome> = {}): Outcome {
  return {
    batchId: 'b',
    plate,
    status: 'done',
    queryId: `q-${plate}`,
    result: {
      id: `q-${plate}`,
      status: 'COMPLETED',
      licensePlate: plate,
      result: { brand: 'FIAT', model: 'UNO MILLE', ação: 'çã' },
    },
    enqueuedAt: 1_700_000_000_000,
    createdAt: 1_700_000_001_000,
    finishedAt: 1_700_000_009_000,
    requests: 2,
    polls: 1,
    attempts: 1,
    ...extra,
  };
}

describe('compact storage', () => {
  it('packs a value to less than half its JSON and reads it back exactly', () => {
    const value = outcome('ABC1D23');
    const packed = pack(value);
    expect(packed.length).toBeLessThan(JSON.stringify(value).length / 2);
    expect(unpack(packed)).toEqual(value);
    expect(unpack(Buffer.from(JSON.stringify(value)))).toEqual(value);
    expect(() => unpack(Buffer.from([0x07, 1, 2]))).toThrow(/unknown format 0x7/);
  });

  it('packs an answer longer than zlib’s output chunk (1 KB) whole', () => {
    // Hex of a counter's hashes does not shrink below the 1 KB chunk: the packed body spans ~20 of them.
    const notes = Array.from({ length: 400 }, (_, i) => createHash('sha256').update(String(i)).digest('hex'));
    const value = outcome('ABC1D23', { result: { id: 'q', status: 'COMPLETED', notes } });
    const packed = pack(value);
    expect(packed.length).toBeGreaterThan(10 * 1024);
    expect(unpack(packed)).toEqual(value);
  });

  const B = { id: 'b', account: 'a' };

  it('reads outcomes stored as plain JSON before, beside packed ones, through get, getMany and scan', async () => {
    ctx = await redisTestContext('compact');
    const keys = new VqbKeys({ prefix: ctx.prefix, queueName: 'plates' });
    const store = new OutcomeStore(ctx.redis, keys);
    const old = outcome('OLD1A11', { status: 'failed', error: { code: 'VEHICLE_NOT_FOUND', message: 'No vehicle' } });
    delete old.result;
    // The old format: the whole outcome as JSON, batch id and plate included.
    await ctx.redis.hset(keys.outcomes(B), old.plate, JSON.stringify(old));
    const fresh = outcome('NEW1A11', { possibleDuplicate: true });
    expect(await store.record('a', fresh)).toBe('recorded');
    expect(await store.record('a', fresh)).toBe('exists');
    const stored = await ctx.redis.hgetBuffer(keys.outcomes(B), fresh.plate);
    expect(stored).toEqual(encodeOutcome(fresh));
    expect(stored!.includes(Buffer.from('"batchId"'))).toBe(false);
    expect(await store.get(B, old.plate)).toEqual(old);
    expect(await store.get(B, fresh.plate)).toEqual(fresh);
    expect(await store.getMany(B, [fresh.plate, 'NONE111', old.plate])).toEqual([fresh, undefined, old]);
    const scanned: Outcome[] = [];
    for await (const o of store.scan(B)) scanned.push(o);
    expect(scanned.sort((a, z) => a.plate.localeCompare(z.plate))).toEqual([fresh, old]);
  });

  it('keeps a reuse entry whole when reuse is on, packed, else a pointer to the batch; still reads plain-JSON entries', async () => {
    ctx = await redisTestContext('compact-reuse');
    const keys = new VqbKeys({ prefix: ctx.prefix, queueName: 'plates' });
    const outcomes = new OutcomeStore(ctx.redis, keys);
    const off = new ReuseStore(ctx.redis, keys, outcomes, { keepMs: 86_400_000 });
    const on = new ReuseStore(ctx.redis, keys, outcomes, { keepMs: 86_400_000, defaultWithinMs: 3_600_000 });
    const entry = { queryId: 'q1', result: { licensePlate: 'AAA1A11' }, at: 1_000 };
    // Reuse off: a pointer to the paying batch's outcome, found while that batch holds it.
    await off.save('default', 'AAA1A11', entry, 'paid', 0);
    expect(await ctx.redis.exists(keys.accountReuse('default', 'AAA1A11'))).toBe(0);
    expect(await ctx.redis.hget(keys.accountReuseDay('default', 0), 'AAA1A11')).toBe('rs paid');
    expect(await off.find('default', 'AAA1A11', 10_000, 2_000)).toBeUndefined();
    expect(await off.countFresh('default', ['AAA1A11'], 10_000, 2_000)).toBe(0);
    const paid: Outcome = {
      ...{ batchId: 'paid', plate: 'AAA1A11', status: 'done', queryId: 'q1', result: entry.result },
      ...{ finishedAt: 1_000, requests: 2, polls: 1, attempts: 1 },
    };
    await ctx.redis.hset(keys.outcomes({ id: 'paid', account: 'default' }), 'AAA1A11', encodeOutcome(paid));
    expect(await off.find('default', 'AAA1A11', 10_000, 2_000)).toEqual({ ...entry, ageMs: 1_000 });
    expect(await off.countFresh('default', ['AAA1A11', 'DDD1D11'], 10_000, 2_000)).toBe(1);
    expect(await off.find('default', 'AAA1A11', 500, 2_000)).toBeUndefined();
    await off.save('default', 'AAA1A11', entry, 'paid', 60_000); // the batch itself asked for reuse: whole
    expect(await off.find('default', 'AAA1A11', 10_000, 2_000)).toEqual({ ...entry, ageMs: 1_000 });
    await on.save('default', 'BBB1B11', entry, 'other', 0);
    expect(await on.find('default', 'BBB1B11', 10_000, 2_000)).toMatchObject({ queryId: 'q1' });
    await ctx.redis.set(keys.accountReuse('default', 'CCC1C11'), JSON.stringify(entry));
    expect(await on.find('default', 'CCC1C11', 10_000, 2_000)).toEqual({ ...entry, ageMs: 1_000 });
    expect(await on.countFresh('default', ['AAA1A11', 'BBB1B11', 'CCC1C11', 'DDD1D11'], 10_000, 2_000)).toBe(3);
  });
});
