// A Redis that stops answering (SIGSTOP: a frozen VM or container) sends no error and closes no
// connection; its commands just hang. The process's health says so in one line, and says when it
// answers again.
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisHealth } from '../../src/redis/health.js';
import { captureLogs } from '../helpers/logs.js';
import { waitFor } from '../helpers/process.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';

let server: DedicatedRedis | undefined;
afterAll(async () => server?.close());

describe('a frozen Redis', () => {
  it('is one "connection lost" line naming it as not answering, then one "back" line, none in between', async () => {
    server = await startRedisServer();
    const redis = new Redis(server.url, { lazyConnect: false });
    const pid = Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]);
    const logs = captureLogs('info');
    const health = new RedisHealth(logs.logger);
    const stop = health.heartbeat(redis, 100, 600);
    try {
      process.kill(pid, 'SIGSTOP');
      await waitFor(async () => health.state === 'down', 5_000, 'the frozen Redis noticed');
      await new Promise((r) => setTimeout(r, 1_500));
      process.kill(pid, 'SIGCONT');
      await waitFor(async () => health.state === 'up', 5_000, 'the thawed Redis noticed');
    } finally {
      process.kill(pid, 'SIGCONT');
      stop();
      redis.disconnect();
    }
    const lines = logs.lines.map((l) => ({ level: l.level, msg: l.msg, reason: l.reason }));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ level: 40, reason: expect.stringContaining('not answering') });
    expect(String(lines[0]!.msg)).toContain('redis connection lost');
    expect(lines[1]).toMatchObject({ level: 30, msg: 'redis connection back' });
  });
});
