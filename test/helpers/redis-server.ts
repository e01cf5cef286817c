// A dedicated redis-server for tests that must change server settings or restart it (eviction
// policy, AOF restarts): the shared Redis on 6379 is never reconfigured.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './process.js';

export interface DedicatedRedis {
  url: string;
  port: number;
  dir: string;
  stop(signal?: NodeJS.Signals): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startRedisServer(args: string[] = []): Promise<DedicatedRedis> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'vqb-redis-'));
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args], { stdio: 'ignore' });
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {});
    for (let i = 0; i < 100; i++) {
      try {
        await probe.connect();
        await probe.ping();
        probe.disconnect();
        return;
      } catch {
        probe.disconnect();
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    throw new Error(`redis-server on ${port} did not start`);
  };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (!child || child.exitCode !== null) return;
    const exited = once(child, 'exit');
    child.kill(signal);
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    stop,
    start,
    async close() {
      await stop('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}
