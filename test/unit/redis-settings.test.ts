// VQ_REDIS_MODE and the Redis settings: each mode parsed, each bad combination one ConfigError naming its variable.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, type Overrides } from '../../src/config.js';
import { ConfigError, isError } from '../../src/errors.js';
import { hashTagOf } from '../../src/redis/settings.js';

const dir = mkdtempSync(join(tmpdir(), 'vqb-redis-settings-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configError(overrides: Overrides): ConfigError {
  try {
    loadConfig({}, overrides);
  } catch (err) {
    if (isError(err, ConfigError)) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('Redis connection settings', () => {
  it('standalone by default, from REDIS_URL', () => {
    const { redis } = loadConfig({}, { REDIS_URL: 'redis://cache:6380/2' });
    expect(redis).toMatchObject({
      mode: 'standalone',
      nodes: [{ host: 'cache', port: 6380 }],
      db: 2,
      display: 'redis://cache:6380/2',
      setting: 'REDIS_URL',
    });
    expect(redis.tls).toBeUndefined();
    expect(loadConfig({}).redis).toMatchObject({
      mode: 'standalone',
      nodes: [{ host: '127.0.0.1', port: 6379 }],
      db: 0,
    });
  });

  it('cluster: several seed nodes; rediss:// with a CA file; the password from a file, never shown', () => {
    const { redis } = loadConfig(
      {},
      {
        VQ_REDIS_MODE: 'cluster',
        REDIS_URL: 'rediss://10.0.0.1:7000, rediss://10.0.0.2:7001',
        REDIS_TLS_CA_FILE: file('ca.pem', CA),
        REDIS_PASSWORD_FILE: file('pw', 's3cret-pw\n'),
      },
    );
    expect(redis).toMatchObject({
      mode: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
      ],
      tls: { ca: CA },
    });
    expect(redis.password?.reveal()).toBe('s3cret-pw');
    expect(JSON.stringify(redis)).not.toContain('s3cret-pw');
    expect(redis.display).toBe('cluster rediss://10.0.0.1:7000,10.0.0.2:7001');
  });

  it('a password in the URL is used and kept out of display', () => {
    const { redis } = loadConfig({}, { REDIS_URL: 'rediss://app:p%40ss@cache:6380' });
    expect(redis.username).toBe('app');
    expect(redis.password?.reveal()).toBe('p@ss');
    expect(redis.display).toBe('rediss://cache:6380');
  });

  it('sentinel: the sentinels and the name; the URL gives scheme, credentials and db', () => {
    const { redis } = loadConfig(
      {},
      {
        VQ_REDIS_MODE: 'sentinel',
        REDIS_SENTINELS: 's1:26379,s2:26380',
        REDIS_SENTINEL_NAME: 'mymaster',
        REDIS_URL: 'redis://:pw@ignored:1/3',
        REDIS_SENTINEL_PASSWORD_FILE: file('spw', 'x'),
      },
    );
    expect(redis).toMatchObject({
      mode: 'sentinel',
      sentinelName: 'mymaster',
      db: 3,
      nodes: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      setting: 'REDIS_SENTINELS',
    });
    expect(redis.sentinelPassword?.reveal()).toBe('x');
  });

  it.each<[string, Overrides, string]>([
    ['sentinel mode without sentinels', { VQ_REDIS_MODE: 'sentinel', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS'],
    ['sentinel mode without a name', { VQ_REDIS_MODE: 'sentinel', REDIS_SENTINELS: 'h:26379' }, 'REDIS_SENTINEL_NAME'],
    [
      'a sentinel without a port',
      { VQ_REDIS_MODE: 'sentinel', REDIS_SENTINELS: 'h', REDIS_SENTINEL_NAME: 'm' },
      'REDIS_SENTINELS',
    ],
    ['sentinels outside sentinel mode', { REDIS_SENTINELS: 'h:26379' }, 'REDIS_SENTINELS'],
    ['several URLs outside cluster mode', { REDIS_URL: 'redis://a:1,redis://b:2' }, 'REDIS_URL'],
    ['mixed schemes', { VQ_REDIS_MODE: 'cluster', REDIS_URL: 'redis://a:1,rediss://b:2' }, 'REDIS_URL'],
    ['a db in cluster mode', { VQ_REDIS_MODE: 'cluster', REDIS_URL: 'redis://a:1/2' }, 'REDIS_URL'],
    ['a cluster prefix without a hash tag', { VQ_REDIS_MODE: 'cluster', VQ_PREFIX: 'vqb' }, 'VQ_PREFIX'],
    ['an empty hash tag', { VQ_REDIS_MODE: 'cluster', VQ_PREFIX: '{}vqb' }, 'VQ_PREFIX'],
    ['a CA file without rediss://', { REDIS_TLS_CA_FILE: file('ca2.pem', CA) }, 'REDIS_TLS_CA_FILE'],
    [
      'a CA file that is missing',
      { REDIS_URL: 'rediss://a:1', REDIS_TLS_CA_FILE: join(dir, 'none.pem') },
      'REDIS_TLS_CA_FILE',
    ],
    [
      'a CA file that is not PEM',
      { REDIS_URL: 'rediss://a:1', REDIS_TLS_CA_FILE: file('junk.pem', 'hello') },
      'REDIS_TLS_CA_FILE',
    ],
    [
      'a password in the URL and a file',
      { REDIS_URL: 'redis://:pw@a:1', REDIS_PASSWORD_FILE: file('pw2', 'x') },
      'REDIS_PASSWORD_FILE',
    ],
    ['an empty password file', { REDIS_PASSWORD_FILE: file('empty', '\n') }, 'REDIS_PASSWORD_FILE'],
    ['an unknown mode', { VQ_REDIS_MODE: 'replicated' }, 'VQ_REDIS_MODE'],
  ])('%s is a ConfigError naming the variable', (_, overrides, variable) => {
    const err = configError(overrides);
    expect(err.variable).toBe(variable);
    expect(err.code).toBe('CONFIG_INVALID');
  });

  it('paid writes wait for a replica in sentinel mode by default; a Cluster refuses the setting', () => {
    const sentinel = { VQ_REDIS_MODE: 'sentinel', REDIS_SENTINELS: 'a:26379', REDIS_SENTINEL_NAME: 'm' } as const;
    expect(loadConfig({}, sentinel).redis.replicaAcks).toBe(1);
    expect(loadConfig({}, { ...sentinel, VQ_REDIS_REPLICA_ACKS: '0' }).redis.replicaAcks).toBe(0);
    expect(loadConfig({}, {}).redis.replicaAcks).toBe(0);
    expect(loadConfig({}, { VQ_REDIS_REPLICA_ACKS: '2' }).redis.replicaAcks).toBe(2);
    const cluster = { VQ_REDIS_MODE: 'cluster', REDIS_URL: 'redis://a:7000', VQ_PREFIX: '{vqb}' } as const;
    expect(loadConfig({}, cluster).redis.replicaAcks).toBe(0);
    const err = configError({ ...cluster, VQ_REDIS_REPLICA_ACKS: '1' });
    expect(err.variable).toBe('VQ_REDIS_REPLICA_ACKS');
    expect(err.message).toMatch(/cluster/);
    expect(configError({ VQ_REDIS_REPLICA_ACKS: '-1' }).variable).toBe('VQ_REDIS_REPLICA_ACKS');
  });

  it('a bad URL is named without its password', () => {
    const err = configError({ REDIS_URL: 'redis://:hunter2@a:1,http://x', VQ_REDIS_MODE: 'cluster' });
    expect(err.variable).toBe('REDIS_URL');
    expect(err.message).not.toContain('hunter2');
  });

  it('hashTagOf follows Redis: the first {…}, not empty', () => {
    expect(hashTagOf('{vqb}:q')).toBe('vqb');
    expect(hashTagOf('a{b}{c}')).toBe('b');
    expect(hashTagOf('{}x{y}')).toBeUndefined();
    expect(hashTagOf('vqb')).toBeUndefined();
  });
});

describe('REDIS_URL in messages', () => {
  it('a URL of the wrong scheme is echoed without its password', () => {
    const err = configError({ REDIS_URL: 'http://user:hunter2@a:1' });
    expect(err.variable).toBe('REDIS_URL');
    expect(err.message).toContain('//***@a:1');
    expect(err.message).not.toContain('hunter2');
  });
});
