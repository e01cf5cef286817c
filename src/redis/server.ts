// A redis-server process of our own. `vqb demo` starts a throwaway one when no Redis is running
// (so the quick start needs nothing but Debian's redis-server package), and tests that must
// restart or reconfigure Redis start theirs the same way; the cluster tests and the bench's
// `cluster` step start a throwaway Redis Cluster of several such servers.

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { clock } from '../clock.js';
import { VqbError } from '../errors.js';

export const INSTALL_HINT = 'apt-get install redis-server';

/** A TCP port nothing listens on right now (the kernel's pick). */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Whether anything accepts TCP connections on host:port: 'refused' when the host said no one
 * listens there, 'open' when a connection was made, 'unknown' otherwise (timeout, no route).
 */
export async function probePort(
  host: string,
  port: number,
  timeoutMs = 1_000,
): Promise<'open' | 'refused' | 'unknown'> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (answer: 'open' | 'refused' | 'unknown') => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => done('unknown'));
    socket.once('connect', () => done('open'));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED' ? 'refused' : 'unknown'));
  });
}

/**
 * Spawns `redis-server` on 127.0.0.1:port with `dir` as its working directory and resolves once it
 * answers PING. Throws REDIS_SERVER_MISSING when the binary is not installed, and
 * REDIS_SERVER_FAILED when it exits or stays silent instead (port taken, bad argument).
 */
export async function spawnRedisServer(options: {
  port: number;
  dir: string;
  args?: readonly string[];
  timeoutMs?: number;
  /** In a process group of its own, so a Ctrl-C meant for us does not stop it before we are done with it. */
  detached?: boolean;
  /** The PATH redis-server is looked up on: the command's environment's (absent: this process's). */
  path?: string | undefined;
}): Promise<ChildProcess> {
  const { port, dir } = options;
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...(options.args ?? [])];
  const child = spawn('redis-server', args, {
    stdio: 'ignore',
    detached: options.detached === true,
    ...(options.path !== undefined ? { env: { ...process.env, PATH: options.path } } : {}),
  });
  let failure: Error | undefined;
  child.once('error', (err: NodeJS.ErrnoException) => {
    failure =
      err.code === 'ENOENT'
        ? new VqbError('REDIS_SERVER_MISSING', `redis-server is not installed (${INSTALL_HINT})`, { cause: err })
        : new VqbError('REDIS_SERVER_FAILED', `cannot start redis-server: ${err.message}`, { cause: err });
  });
  child.once('exit', (code, signal) => {
    failure ??= new VqbError(
      'REDIS_SERVER_FAILED',
      `redis-server on port ${port} exited at start (${signal ?? `code ${code}`})`,
    );
  });
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  const deadline = clock.now() + (options.timeoutMs ?? 10_000);
  try {
    for (;;) {
      if (failure) throw failure;
      try {
        await probe.connect();
        await probe.ping();
        return child;
      } catch {
        probe.disconnect();
      }
      if (clock.now() > deadline) {
        child.kill('SIGKILL');
        throw new VqbError(
          'REDIS_SERVER_FAILED',
          `redis-server on port ${port} did not answer within ${options.timeoutMs ?? 10_000} ms`,
        );
      }
      await new Promise((r) => clock.setTimeout(r, 100));
    }
  } finally {
    probe.disconnect();
  }
}

/** Stops a redis-server started by spawnRedisServer and waits for it to exit. */
export async function stopRedisServer(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  await exited;
}

export interface ThrowawayRedis {
  url: string;
  port: number;
  /** Stops the server and deletes its directory. */
  close(): Promise<void>;
}

/**
 * A redis-server that keeps nothing: on a free port, in a temporary directory, no snapshots, no
 * append-only file. Stopped by close(), and killed when this process exits if close() was never
 * reached (a process killed with SIGKILL leaves it running: nothing can run then).
 */
export async function startThrowawayRedis(options: { path?: string | undefined } = {}): Promise<ThrowawayRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'vqb-redis-'));
  try {
    // Another process may take the free port before redis-server binds it: try a few.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      let child: ChildProcess;
      try {
        child = await spawnRedisServer({
          port,
          dir,
          args: ['--save', '', '--appendonly', 'no'],
          detached: true,
          path: options.path,
        });
      } catch (err) {
        if ((err as VqbError).code === 'REDIS_SERVER_FAILED' && attempt < 3) continue;
        throw err;
      }
      const killOnExit = () => child.kill('SIGKILL');
      process.once('exit', killOnExit);
      return {
        url: `redis://127.0.0.1:${port}`,
        port,
        async close() {
          process.removeListener('exit', killOnExit);
          await stopRedisServer(child);
          await rm(dir, { recursive: true, force: true });
        },
      };
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

export interface ThrowawayCluster {
  /** The masters, in the order they were started. */
  nodes: { port: number; url: string }[];
  /** REDIS_URL for VQ_REDIS_MODE=cluster: every master's URL, comma-separated (the seeds). */
  url: string;
  /** Stops every server and deletes their directory. */
  close(): Promise<void>;
}

const CLUSTER_ARGS = [
  '--save',
  '',
  '--appendonly',
  'no',
  '--cluster-enabled',
  'yes',
  '--cluster-config-file',
  'nodes.conf',
  '--cluster-node-timeout',
  '5000',
];

/**
 * A Redis Cluster of `masters` masters and no replicas, each a server like startThrowawayRedis's
 * (free port, keeps nothing, its own directory under one temporary directory), the slots split
 * evenly by `redis-cli --cluster create` (Debian's redis-tools, which redis-server depends on).
 * Resolves once every node says cluster_state:ok and knows every other.
 */
export async function startThrowawayCluster(masters = 3): Promise<ThrowawayCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'vqb-cluster-'));
  const children: ChildProcess[] = [];
  const nodes: { port: number; url: string }[] = [];
  const killOnExit = () => {
    for (const child of children) child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const close = async () => {
    process.removeListener('exit', killOnExit);
    await Promise.all(children.map((child) => stopRedisServer(child)));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      // As in startThrowawayRedis: another process may take the free port first.
      for (let attempt = 1; ; attempt++) {
        const port = await freePort();
        const nodeDir = join(dir, String(port));
        await mkdir(nodeDir);
        try {
          children.push(await spawnRedisServer({ port, dir: nodeDir, args: CLUSTER_ARGS, detached: true }));
        } catch (err) {
          if ((err as VqbError).code === 'REDIS_SERVER_FAILED' && attempt < 3) continue;
          throw err;
        }
        nodes.push({ port, url: `redis://127.0.0.1:${port}` });
        break;
      }
    }
    try {
      await promisify(execFile)('redis-cli', [
        '--cluster',
        'create',
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ]);
    } catch (err) {
      throw new VqbError('REDIS_SERVER_FAILED', `redis-cli --cluster create failed: ${(err as Error).message}`, {
        cause: err,
      });
    }
    // `create` returns once the slots are assigned; the nodes learn of each other by gossip after.
    const probes = nodes.map((n) => {
      const redis = new Redis(n.port, '127.0.0.1', { maxRetriesPerRequest: 2 });
      redis.on('error', () => {});
      return redis;
    });
    try {
      const deadline = clock.now() + 30_000;
      for (;;) {
        const infos = await Promise.all(probes.map((r) => r.cluster('INFO')));
        const known = new RegExp(`cluster_known_nodes:${masters}\\b`);
        if (infos.every((info) => /cluster_state:ok/.test(info) && known.test(info))) break;
        if (clock.now() > deadline)
          throw new VqbError('REDIS_SERVER_FAILED', `the cluster of ${masters} did not reach cluster_state:ok in 30 s`);
        await new Promise((r) => clock.setTimeout(r, 100));
      }
    } finally {
      for (const r of probes) r.disconnect();
    }
    return { nodes, url: nodes.map((n) => n.url).join(','), close };
  } catch (err) {
    await close();
    throw err;
  }
}
