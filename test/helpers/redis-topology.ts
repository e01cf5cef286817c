// Real Redis topologies for the connection-mode tests, started from Debian's redis-server: a
// Redis Cluster (started by src/redis/server.ts's startThrowawayCluster, which the bench shares),
// a primary with a replica and three sentinels, a TLS-only server with a CA made by openssl. Each
// lives in a temporary directory on free ports; close() stops every process it started and deletes
// the directory.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import type { LegacyRedisOptions } from '../../src/redis/connection.js';
import { freePort, startThrowawayCluster } from '../../src/redis/server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const run = promisify(execFile);

interface Processes {
  children: ChildProcess[];
  dir: string;
}

async function processes(label: string): Promise<Processes> {
  return { children: [], dir: await mkdtemp(join(tmpdir(), `vqb-${label}-`)) };
}

async function closeAll(p: Processes): Promise<void> {
  await Promise.all(
    p.children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }),
  );
  await rm(p.dir, { recursive: true, force: true });
}

/** Connects to one server of a topology directly (no cluster or sentinel logic). */
export function direct(port: number, options: LegacyRedisOptions = {}): Redis {
  const redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 2, ...options });
  redis.on('error', () => {});
  return redis;
}

/** Starts `redis-server <args>` and resolves once `port` answers PING (over `probe` options, e.g. TLS). */
async function startServer(
  p: Processes,
  args: string[],
  port: number,
  probe: LegacyRedisOptions = {},
): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: p.dir });
  p.children.push(child);
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`redis-server ${args.join(' ')} exited (${child.exitCode}): ${stderr}`);
    const redis = new Redis({
      host: '127.0.0.1',
      port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      ...probe,
    });
    redis.on('error', () => {});
    try {
      await redis.connect();
      await redis.ping();
      return child;
    } catch {
      // not up yet
    } finally {
      redis.disconnect();
    }
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function until(check: () => Promise<boolean>, label: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${label} not reached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface ClusterNode {
  port: number;
  id: string;
  redis: Redis;
}

export interface TestCluster {
  nodes: ClusterNode[];
  /** The master that owns `slot` now. */
  ownerOf(slot: number): Promise<ClusterNode>;
  slotOf(key: string): Promise<number>;
  /**
   * Moves `slot` to `to` the way an operator reshards: IMPORTING/MIGRATING, MIGRATE … KEYS in
   * batches of `batch` until the source holds none of its keys, then SETSLOT NODE on every master.
   * Returns how many keys moved.
   */
  migrateSlot(
    slot: number,
    to: ClusterNode,
    options?: { batch?: number; between?: () => Promise<void> },
  ): Promise<number>;
  close(): Promise<void>;
}

export async function startCluster(masters = 3): Promise<TestCluster> {
  const started = await startThrowawayCluster(masters);
  const nodes: ClusterNode[] = [];
  try {
    for (const { port } of started.nodes) {
      const redis = direct(port);
      nodes.push({ port, id: await redis.cluster('MYID'), redis });
    }
  } catch (err) {
    for (const n of nodes) n.redis.disconnect();
    await started.close();
    throw err;
  }

  const cluster: TestCluster = {
    nodes,
    async slotOf(key) {
      return nodes[0]!.redis.cluster('KEYSLOT', key);
    },
    async ownerOf(slot) {
      const slots = (await nodes[0]!.redis.cluster('SLOTS')) as unknown as [number, number, [string, number, string]][];
      const range = slots.find(([from, to]) => slot >= from && slot <= to);
      const node = nodes.find((n) => n.id === range?.[2][2]);
      if (!node) throw new Error(`no owner of slot ${slot}`);
      return node;
    },
    async migrateSlot(slot, to, { batch = 20, between } = {}) {
      const from = await cluster.ownerOf(slot);
      if (from === to) return 0;
      await to.redis.cluster('SETSLOT', slot, 'IMPORTING', from.id);
      await from.redis.cluster('SETSLOT', slot, 'MIGRATING', to.id);
      let moved = 0;
      for (;;) {
        const keys = (await from.redis.cluster('GETKEYSINSLOT', slot, batch)) as string[];
        if (keys.length === 0) break;
        await from.redis.migrate('127.0.0.1', to.port, '', 0, 5_000, 'REPLACE', 'KEYS', ...keys);
        moved += keys.length;
        // Lets the caller's clients work while the slot is half moved (ASK, TRYAGAIN).
        await between?.();
      }
      // The new owner first, then the old one, then the rest (as redis-cli --cluster reshard does).
      await to.redis.cluster('SETSLOT', slot, 'NODE', to.id);
      await from.redis.cluster('SETSLOT', slot, 'NODE', to.id);
      for (const n of nodes) if (n !== to && n !== from) await n.redis.cluster('SETSLOT', slot, 'NODE', to.id);
      return moved;
    },
    async close() {
      for (const n of nodes) n.redis.disconnect();
      await started.close();
    },
  };
  return cluster;
}

export interface TestSentinels {
  name: string;
  primary: { port: number };
  replica: { port: number };
  sentinels: { port: number; redis: Redis }[];
  /** REDIS_SENTINELS for vqb. */
  list: string;
  /**
   * Sends the replica's redis-server a signal: SIGSTOP freezes it (what the primary sends it waits
   * in the socket, applied at SIGCONT), unlike a blackholed link, which loses it.
   */
  signalReplica(signal: NodeJS.Signals): void;
  /** With `replicationProxy`: the link the replica replicates over, which a test can blackhole. */
  replication?: TcpProxy;
  /** The port of the primary the sentinels name now. */
  primaryPort(): Promise<number>;
  close(): Promise<void>;
}

export interface SentinelOptions {
  /**
   * The replica replicates through a TCP proxy the test controls (`replication`): blackholed, the
   * primary acknowledges writes no replica will ever have. The sentinels would point the replica
   * at the primary itself once failover-timeout has passed (+fix-slave-config), so with this the
   * timeout is a minute: tests using it finish within that.
   */
  replicationProxy?: boolean;
}

/** One primary, one replica, three sentinels (quorum 2) monitoring them as `name`. */
export async function startSentinels(name = 'vqbprimary', options: SentinelOptions = {}): Promise<TestSentinels> {
  const p = await processes('sentinel');
  const sentinels: { port: number; redis: Redis }[] = [];
  let replication: TcpProxy | undefined;
  let replicaProcess: ChildProcess | undefined;
  try {
    const primary = { port: await freePort() };
    const replica = { port: await freePort() };
    if (options.replicationProxy) replication = await startTcpProxy(primary.port);
    const upstreamPort = replication?.port ?? primary.port;
    for (const [port, extra] of [
      [primary.port, []],
      [replica.port, ['--replicaof', '127.0.0.1', String(upstreamPort)]],
    ] as const) {
      const dir = join(p.dir, String(port));
      await mkdir(dir);
      const child = await startServer(
        p,
        ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', ...extra],
        port,
      );
      if (port === replica.port) replicaProcess = child;
    }
    const replicaRedis = direct(replica.port);
    await until(async () => /master_link_status:up/.test(await replicaRedis.info('replication')), 'replica in sync');
    replicaRedis.disconnect();
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const file = join(p.dir, `sentinel-${port}.conf`);
      await writeFile(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${p.dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${primary.port} 2`,
          `sentinel down-after-milliseconds ${name} 2000`,
          `sentinel failover-timeout ${name} ${options.replicationProxy ? 60_000 : 10_000}`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      await startServer(p, [file, '--sentinel'], port);
      sentinels.push({ port, redis: direct(port) });
    }
    // Every sentinel knows the replica and the other sentinels before a failover is asked for.
    await until(async () => {
      for (const s of sentinels) {
        const [master] = (await s.redis.call('SENTINEL', 'MASTERS')) as string[][];
        const fields = Object.fromEntries((master ?? []).flatMap((v, i, a) => (i % 2 === 0 ? [[v, a[i + 1]]] : [])));
        if (Number(fields['num-slaves']) < 1 || Number(fields['num-other-sentinels']) < 2) return false;
      }
      return true;
    }, 'sentinels know the replica and each other');
    return {
      name,
      primary,
      replica,
      ...(replication ? { replication } : {}),
      signalReplica(signal) {
        replicaProcess!.kill(signal);
      },
      sentinels,
      list: sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      async primaryPort() {
        const [, port] = (await sentinels[0]!.redis.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [
          string,
          string,
        ];
        return Number(port);
      },
      async close() {
        for (const s of sentinels) s.redis.disconnect();
        await replication?.close();
        await closeAll(p);
      },
    };
  } catch (err) {
    for (const s of sentinels) s.redis.disconnect();
    await replication?.close();
    await closeAll(p);
    throw err;
  }
}

export interface TestTlsRedis {
  port: number;
  caFile: string;
  passwordFile: string;
  /** rediss:// URL (no password: it is in passwordFile). */
  url: string;
  close(): Promise<void>;
}

/** True when Debian's redis-server was built with TLS (it then accepts --tls-port). */
export async function redisHasTls(): Promise<boolean> {
  const { stdout } = await run('ldd', [(await run('sh', ['-c', 'command -v redis-server'])).stdout.trim()]).catch(
    () => ({ stdout: '' }),
  );
  return /libssl/.test(stdout);
}

/** A redis-server that speaks TLS only (--port 0 --tls-port), with a CA and certificate made by openssl, and a password. */
export async function startTlsRedis(): Promise<TestTlsRedis> {
  const p = await processes('tls');
  try {
    const f = (name: string) => join(p.dir, name);
    const openssl = (...args: string[]) => run('openssl', args, { cwd: p.dir });
    await openssl(
      'req',
      '-x509',
      '-new',
      '-nodes',
      '-newkey',
      'rsa:2048',
      '-keyout',
      f('ca.key'),
      '-out',
      f('ca.crt'),
      '-days',
      '1',
      '-subj',
      '/CN=vqb test CA',
    );
    await openssl(
      'req',
      '-new',
      '-nodes',
      '-newkey',
      'rsa:2048',
      '-keyout',
      f('server.key'),
      '-out',
      f('server.csr'),
      '-subj',
      '/CN=localhost',
    );
    await writeFile(f('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    await openssl(
      'x509',
      '-req',
      '-in',
      f('server.csr'),
      '-CA',
      f('ca.crt'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-out',
      f('server.crt'),
      '-days',
      '1',
      '-extfile',
      f('san.ext'),
    );
    const password = `tls-test-${Math.random().toString(36).slice(2)}`;
    await writeFile(f('password'), `${password}\n`);
    const port = await freePort();
    const ca = await readFile(f('ca.crt'), 'utf8');
    await startServer(
      p,
      [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        p.dir,
        '--save',
        '',
        '--appendonly',
        'no',
        '--requirepass',
        password,
        '--tls-cert-file',
        f('server.crt'),
        '--tls-key-file',
        f('server.key'),
        '--tls-ca-cert-file',
        f('ca.crt'),
        '--tls-auth-clients',
        'no',
      ],
      port,
      { tls: { ca }, password },
    );
    return {
      port,
      caFile: f('ca.crt'),
      passwordFile: f('password'),
      url: `rediss://127.0.0.1:${port}`,
      close: () => closeAll(p),
    };
  } catch (err) {
    await closeAll(p);
    throw err;
  }
}
