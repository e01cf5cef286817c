// Pools of keys as the accounts file declares them (docs/plans.md): a pool joins accounts of one
// product and one owner; anything else is a typed error at load, and a pool a batch names that
// does not exist is POOL_NOT_FOUND before anything is stored.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAccounts, poolFor } from '../../src/accounts/account.js';
import { loadConfig } from '../../src/config.js';
import { isError, PoolError } from '../../src/errors.js';
import { KeyPools } from '../../src/queue/pool.js';
import { parseRateLimit } from '../../src/setting-values.js';

const defaults = { baseUrl: 'https://api.example.com', product: 'agregados', rateLimit: parseRateLimit('auto')! };
const TOKEN_A = 'token-of-team-a-0123456789';
const TOKEN_B = 'token-of-team-b-0123456789';

function load(accounts: object[]) {
  return parseAccounts(JSON.stringify({ accounts }), defaults);
}

function poolError(accounts: object[]): PoolError {
  try {
    load(accounts);
  } catch (error) {
    expect(isError(error, PoolError)).toBe(true);
    expect((error as PoolError).code).toBe('POOL_INVALID');
    return error as PoolError;
  }
  throw new Error('expected a PoolError');
}

describe('pools in the accounts file', () => {
  it('keys of one product and owner form a pool, in the order listed', () => {
    const accounts = load([
      { id: 'a', apiKey: 'ka', pool: 'fleet', tokens: [TOKEN_A] },
      { id: 'solo', apiKey: 'ks' },
      { id: 'b', apiKey: 'kb', pool: 'fleet', tokens: [TOKEN_A] },
    ]);
    expect(accounts.map((a) => a.pool)).toEqual(['fleet', undefined, 'fleet']);
    expect(poolFor({ accounts }, 'fleet')).toEqual({ name: 'fleet', home: 'a', keys: ['b'] });
    expect(poolFor({ accounts }, 'fleet', 'b')).toEqual({ name: 'fleet', home: 'b', keys: ['a'] });
  });

  it('refuses a pool over two products', () => {
    const error = poolError([
      { id: 'a', apiKey: 'ka', pool: 'fleet' },
      { id: 'b', apiKey: 'kb', pool: 'fleet', product: 'crlv' },
    ]);
    expect(error.pool).toBe('fleet');
    expect(error.message).toContain('not one product');
  });

  it('refuses a pool over two owners (other tokens), and never prints a token', () => {
    const error = poolError([
      { id: 'a', apiKey: 'ka', pool: 'fleet', tokens: [TOKEN_A] },
      { id: 'b', apiKey: 'kb', pool: 'fleet', tokens: [TOKEN_B] },
    ]);
    expect(error.message).toContain('other owners');
    expect(error.message).not.toContain(TOKEN_A);
    expect(error.message).not.toContain(TOKEN_B);
    poolError([
      { id: 'a', apiKey: 'ka', pool: 'fleet', tokens: [TOKEN_A] },
      { id: 'b', apiKey: 'kb', pool: 'fleet' },
    ]);
  });

  it('refuses a pool named like an account, and a pool name of the wrong form', () => {
    expect(
      poolError([
        { id: 'fleet', apiKey: 'ka', pool: 'fleet' },
        { id: 'b', apiKey: 'kb', pool: 'fleet' },
      ]).message,
    ).toContain('named like an account');
    expect(() => load([{ id: 'a', apiKey: 'ka', pool: 'Fleet One' }])).toThrow(/pool/);
  });

  it('a pool nobody declared, or an account outside it, is POOL_NOT_FOUND naming the pools there are', () => {
    const accounts = load([
      { id: 'a', apiKey: 'ka', pool: 'fleet' },
      { id: 'solo', apiKey: 'ks' },
    ]);
    expect(() => poolFor({ accounts }, 'other')).toThrow(expect.objectContaining({ code: 'POOL_NOT_FOUND' }));
    expect(() => poolFor({ accounts }, 'other')).toThrow(/declared: fleet/);
    expect(() => poolFor({ accounts }, 'fleet', 'solo')).toThrow(expect.objectContaining({ code: 'POOL_NOT_FOUND' }));
  });

  it("pools on a Redis Cluster are refused at load (a pooled step touches two accounts' slots), named and typed", () => {
    const dir = mkdtempSync(join(tmpdir(), 'vqb-pools-'));
    const file = join(dir, 'accounts.json');
    writeFileSync(
      file,
      JSON.stringify({
        accounts: [
          { id: 'a', apiKey: 'ka', pool: 'fleet' },
          { id: 'b', apiKey: 'kb', pool: 'fleet' },
        ],
      }),
    );
    const env = { VQ_ACCOUNTS_FILE: file, VQ_BASE_URL: 'https://api.example.com' };
    const cluster = { ...env, VQ_REDIS_MODE: 'cluster', REDIS_URL: 'redis://127.0.0.1:7000,redis://127.0.0.1:7001' };
    expect(() => loadConfig(cluster)).toThrow(expect.objectContaining({ code: 'POOL_INVALID', pool: 'fleet' }));
    expect(() => loadConfig(cluster)).toThrow(/not a Redis Cluster/);
    expect(loadConfig(env).accounts.map((a) => a.pool)).toEqual(['fleet', 'fleet']);
    writeFileSync(file, JSON.stringify({ accounts: [{ id: 'a', apiKey: 'ka' }] }));
    expect(loadConfig(cluster).redis.mode).toBe('cluster');
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('keys that look like one quota (KeyPools.observe, on a clock the test owns)', () => {
  function pools() {
    let now = 1_000_000;
    const marked: string[] = [];
    const record = (id: string) => ({
      id,
      account: { id, pool: 'p' },
      line: { markSharedQuota: async (other: string) => void marked.push(`${id}>${other}`) },
    });
    const records = [record('a'), record('b')];
    const accounts = { all: () => records, for: (id: string) => records.find((r) => r.id === id)! };
    const kp = new KeyPools(accounts as never, {} as never, {} as never, () => now);
    // Both keys announce the same limit, reset and remainder, a second apart, `samples` times.
    async function agree(samples: number): Promise<void> {
      for (let i = 0; i < samples; i++) {
        now += 1_000;
        const quota = { limit: 20, remaining: 1, resetAt: 2_000_000, observedAt: now };
        await kp.observe('a', quota);
        await kp.observe('b', { ...quota, observedAt: now + 10 });
      }
    }
    return { kp, marked, agree, tick: (ms: number) => void (now += ms), now: () => now };
  }

  it('remainders that agree and a few 429s on each key: one quota, marked on both', async () => {
    const { kp, marked, agree } = pools();
    for (let i = 0; i < 3; i++) {
      kp.limited('a');
      kp.limited('b');
    }
    await agree(6);
    expect(marked).toContain('a>b');
    expect(marked).toContain('b>a');
  });

  it('two independent keys both used to the full (remainders agree) but no 429s: not one quota', async () => {
    const { marked, agree } = pools();
    await agree(30);
    expect(marked).toEqual([]);
  });

  it('one stray 429 on each (requests bunched on their way) is not one quota; nor are 429s a minute old', async () => {
    const { kp, marked, agree, tick } = pools();
    kp.limited('a');
    kp.limited('b');
    await agree(10);
    expect(marked).toEqual([]);
    for (let i = 0; i < 3; i++) {
      kp.limited('a');
      kp.limited('b');
    }
    tick(61_000);
    await agree(10);
    expect(marked).toEqual([]);
  });

  it('one key refused again and again while the other takes the window (none on it): one quota', async () => {
    const { kp, marked, agree, tick } = pools();
    for (let i = 0; i < 10; i++) {
      kp.limited('a');
      tick(500);
    }
    await agree(5);
    expect(marked).toContain('a>b');
    expect(marked).toContain('b>a');
  });

  it('a key refused again and again beside a key of another limit: not one quota (its own limit is its own)', async () => {
    const { kp, marked, tick, now } = pools();
    await kp.observe('a', { limit: 20, remaining: 0, resetAt: now() + 1_000, observedAt: now() });
    for (let i = 0; i < 10; i++) {
      kp.limited('a');
      tick(500);
    }
    for (let i = 0; i < 5; i++) {
      tick(1_000);
      await kp.observe('b', { limit: 10, remaining: 4, resetAt: now() + 1_000, observedAt: now() });
    }
    expect(marked).toEqual([]);
  });

  it('a key refused again and again beside a key that, like it, announces no limit: not one quota (no limit to share)', async () => {
    const { kp, marked, tick, now } = pools();
    await kp.observe('a', { remaining: 0, resetAt: now() + 1_000, observedAt: now() });
    for (let i = 0; i < 10; i++) {
      kp.limited('a');
      tick(500);
    }
    await kp.observe('b', { remaining: 4, resetAt: now() + 1_000, observedAt: now() });
    expect(marked).toEqual([]);
  });

  it('a few 429s on one key, or ten spread over more than ten seconds, are not one quota', async () => {
    const { kp, marked, agree, tick } = pools();
    for (let i = 0; i < 9; i++) kp.limited('a');
    await agree(6);
    expect(marked).toEqual([]);
    tick(11_000);
    kp.limited('a');
    // The tenth came 17 s after the first nine (agree's six seconds, then eleven).
    await agree(5);
    expect(marked).toEqual([]);
  });
});
