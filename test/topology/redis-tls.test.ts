// Managed Redis speaks TLS: a redis-server that listens on a TLS port only (--port 0), with a CA
// made by openssl for the test and a password, and a batch that runs over rediss:// through
// `vqb run`, trusting REDIS_TLS_CA_FILE and reading the password from REDIS_PASSWORD_FILE.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { isError, RedisUnavailableError } from '../../src/errors.js';
import { checkRedis, connectRedis } from '../../src/redis/connection.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { harnessEnv, rejection, runVqb } from '../helpers/process.js';
import { redisHasTls, startTlsRedis, type TestTlsRedis } from '../helpers/redis-topology.js';

const harness = useHarness();
let tls: TestTlsRedis;

beforeAll(async () => {
  // Debian's redis-server is built with OpenSSL; if a build without it is installed, say so.
  expect(await redisHasTls(), 'redis-server is built without TLS (no libssl)').toBe(true);
  tls = await startTlsRedis();
}, 60_000);

afterAll(async () => {
  await tls?.close();
});

describe('Redis over TLS (rediss://)', () => {
  it('runs a batch to the end over rediss:// with REDIS_TLS_CA_FILE and REDIS_PASSWORD_FILE', async () => {
    const settings = { REDIS_URL: tls.url, REDIS_TLS_CA_FILE: tls.caFile, REDIS_PASSWORD_FILE: tls.passwordFile };
    const h = await harness.start({ label: 'tls', workers: 0, config: settings });
    const plates = makePlates(40, 7_000);
    const file = join(h.config.outDir, '..', 'tls.csv');
    await writeFile(file, `placa\r\n${plates.join('\r\n')}\r\n`);

    const { code, stdout, stderr } = await runVqb(['run', file], harnessEnv(h, settings));
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const batchId = /batch (tls-[0-9a-f]{12})/.exec(stdout)?.[1];
    expect(batchId).toBeDefined();
    const info = await h.services.batchViews.get(batchId!);
    expect(info.counts).toMatchObject({ total: 40, enqueued: 40, done: 40 });
    const stats = h.sim.stats({ plates: true });
    expect(Object.values(stats.createsByPlate ?? {}).every((n) => n === 1)).toBe(true);
    expect(stats.creates).toBe(40);
    // The keys live in the TLS server, under the harness's prefix.
    expect((await h.services.redis.keys(`${h.config.prefix}*`)).length).toBeGreaterThan(0);
  }, 120_000);

  it('without the CA the certificate is refused: one line naming REDIS_URL, no password in it', async () => {
    const config = loadConfig({}, { REDIS_URL: tls.url, REDIS_PASSWORD_FILE: tls.passwordFile });
    const redis = connectRedis(config.redis, { failFast: true });
    try {
      const err = await rejection(checkRedis(redis, config.redis, 2_000));
      expect(isError(err, RedisUnavailableError)).toBe(true);
      expect(err.message).toBe(`cannot reach Redis at rediss://127.0.0.1:${tls.port} (set REDIS_URL)`);
    } finally {
      redis.disconnect();
    }
  });
});
