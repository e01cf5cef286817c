// A dedicated redis-server for tests that must change server settings or restart it (eviction
// policy, AOF restarts): the shared Redis on 6379 is never reconfigured. Started the way `vqb demo`
// starts its throwaway one (src/redis/server.ts).
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, spawnRedisServer, stopRedisServer } from '../../src/redis/server.js';

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
    child = await spawnRedisServer({ port, dir, args: ['--save', '', ...args] });
  };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child) await stopRedisServer(child, signal);
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
