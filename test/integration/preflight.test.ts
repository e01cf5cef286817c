// Start-up checks: Redis reachable (one line naming REDIS_URL), and no eviction of paid results.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, spawnRedisServer, stopRedisServer } from '../../src/redis/server.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';

const BIN = resolve(import.meta.dirname, '../../bin/vqb.js');
let server: DedicatedRedis | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function vqb(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  return { code, stderr };
}

describe('start-up checks', () => {
  it('an unreachable Redis stops start-up with one line naming REDIS_URL', async () => {
    const { code, stderr } = await vqb(['status'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:1 \(set REDIS_URL\)/);
  });

  it('a Redis that may evict keys is refused, unless VQ_ALLOW_EVICTION says go on', async () => {
    server = await startRedisServer(['--maxmemory-policy', 'allkeys-lru']);
    const refused = await vqb(['status'], { REDIS_URL: server.url });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/maxmemory-policy is allkeys-lru.*noeviction/);
    const allowed = await vqb(['status'], { REDIS_URL: server.url, VQ_ALLOW_EVICTION: 'true' });
    expect(allowed.code).toBe(0);
  });

  it.each([
    { command: ['work'], started: 'worker started' },
    { command: ['serve', '--no-inbox'], started: '"msg":"serving"' },
  ])(
    '`vqb $command.0` started while Redis is away waits for it (one JSON line), then starts and stops cleanly',
    async ({ command, started }) => {
      const port = await freePort();
      const dir = await mkdtemp(join(tmpdir(), 'vqb-preflight-'));
      const env = {
        PATH: process.env.PATH ?? '',
        LOG_LEVEL: 'info',
        REDIS_URL: `redis://127.0.0.1:${port}`,
        VQ_PREFIX: `{vqbtest-wait-${port}}`,
        VQ_BASE_URL: 'http://127.0.0.1:9',
        VQ_API_KEY: 'k',
      };
      const child = spawn(process.execPath, [BIN, ...command], {
        env: { ...env, VQ_HTTP_PORT: String(await freePort()), VQ_ROOT: dir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      const seen = (text: string) =>
        new Promise<void>((done) => {
          const check = () => out.includes(text) && done();
          child.stdout.on('data', check);
          child.stderr.on('data', check);
          check();
        });
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      try {
        await seen('waiting for it');
        const redis = await spawnRedisServer({ port, dir, args: ['--save', ''] });
        try {
          await seen(started);
          child.kill('SIGTERM');
          const [code] = (await once(child, 'exit')) as [number];
          expect(code).toBe(0);
          // serve also prints one line for people on stdout; the rest is JSON.
          const lines = out
            .trim()
            .split('\n')
            .filter((l) => !l.startsWith('vqb serving on '));
          for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
          // Said once, not once per attempt.
          expect(lines.filter((l) => l.includes('waiting for it'))).toHaveLength(1);
        } finally {
          await stopRedisServer(redis);
        }
      } finally {
        child.kill('SIGKILL');
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
