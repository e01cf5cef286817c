// Redis connections: how vqb connects, and the start-up checks every command runs. The names of
// the keys live in keys.ts.

import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { ReplyMappingFromOptions } from 'ioredis/built/types.js';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import { isError, RedisUnavailableError, VqbError } from '../errors.js';
import type { Logger } from '../logger.js';
import { parseRedisConnection, type RedisConnection } from './settings.js';

export type { RedisConnection, RedisMode } from './settings.js';

/**
 * ioredis's options with the reply shapes pinned to its default, 'legacy' (RESP2's shapes over
 * either protocol), which vqb and BullMQ read. ioredis 6's constructors take `replyMapping` as
 * exactly 'legacy' or 'resp3' while its options type also allows undefined, so a plain
 * `RedisOptions` is refused under exactOptionalPropertyTypes.
 */
export type LegacyRedisOptions = RedisOptions & { replyMapping?: 'legacy' };

/**
 * A connection to standalone Redis (also through Sentinel) or to a Redis Cluster: vqb's keys share
 * one hash slot, so every command and script works on either.
 */
export type RedisClient = Redis | Cluster;

export interface ConnectOptions {
  /** Short-lived commands (status, enqueue) fail fast; BullMQ workers must wait out reconnects. */
  failFast?: boolean;
  name?: string;
}

/** A standalone connection described by a URL alone (bench and tools that take a bare URL). */
export function standaloneConnection(url: string): RedisConnection {
  return parseRedisConnection({ mode: 'standalone', url, prefix: '{vqb}' });
}

/**
 * ioredis's failoverDetector closes its subscriptions to the sentinels on disconnect() only: after
 * quit() they keep the process alive forever (`vqb run` finished its batch and never exited). This
 * closes them whenever the connection ends, and its duplicates (BullMQ's blocking connections)
 * are of this class too.
 */
class SentinelRedis extends Redis {
  constructor(options: LegacyRedisOptions) {
    super(options);
    this.on('end', () => (this as unknown as { connector: { disconnect(): void } }).connector.disconnect());
  }

  // ioredis 6 types duplicate() by the reply shapes its override asks for; vqb never asks for any
  // but the default ('legacy'), hence the casts.
  override duplicate<Override extends Partial<RedisOptions> | undefined = undefined>(
    override?: Override,
  ): Redis<ReplyMappingFromOptions<'legacy', Override>> {
    const options = { ...this.options, ...override } as LegacyRedisOptions;
    return new SentinelRedis(options) as Redis<ReplyMappingFromOptions<'legacy', Override>>;
  }
}

/**
 * The one place vqb opens a Redis connection, in every mode. BullMQ workers need
 * `maxRetriesPerRequest: null` (blocking commands must wait out reconnects and failovers);
 * short-lived commands want to fail fast instead, hence `failFast`. A string is a standalone URL.
 */
export function connectRedis(target: RedisConnection | string, options: ConnectOptions = {}): RedisClient {
  const settings = typeof target === 'string' ? standaloneConnection(target) : target;
  const common: LegacyRedisOptions = {
    maxRetriesPerRequest: options.failFast ? 2 : null,
    enableOfflineQueue: true,
    connectionName: options.name ?? 'vqb',
    ...(settings.username !== undefined ? { username: settings.username } : {}),
    ...(settings.password ? { password: settings.password.reveal() } : {}),
    ...(settings.tls ? { tls: settings.tls.ca ? { ca: settings.tls.ca } : {} } : {}),
  };
  let client: RedisClient;
  if (settings.mode === 'cluster') {
    const clusterOptions: ClusterOptions & { redisOptions: LegacyRedisOptions } = {
      redisOptions: common,
      // Reads go to masters too: a replica may lag behind a result just written.
      scaleReads: 'master',
      enableOfflineQueue: true,
      // While vqb's slot is being migrated, a multi-key command or script whose keys are split
      // between the two nodes is answered TRYAGAIN until the last key has moved, and a MULTI may
      // bounce between ASK and MOVED. Every retry counts against maxRedirections: together they
      // ride out a slot held half-moved for about 20 s (a reshard moves a slot in well under a
      // second) instead of failing the command after 64 quick tries (ioredis's default).
      retryDelayOnTryAgain: 100,
      retryDelayOnMoved: 20,
      retryDelayOnClusterDown: 200,
      maxRedirections: 200,
      // Every busy account's BullMQ Worker holds a cluster connection of its own, and each asks
      // for the slot map every 5 s by default: 1,000 busy accounts in 4 processes sent over a
      // thousand CLUSTER SLOTS a second, timed out at 1 s on a loaded machine
      // (ClusterAllFailedError) and delayed the first requests 20-50 s (bench step `cluster`). A
      // MOVED answer refreshes the map at once, so a reshard is followed without the timer.
      slotsRefreshInterval: 60_000,
      slotsRefreshTimeout: 5_000,
      // Without this, a fail-fast command against an unreachable cluster waits forever for the
      // first slot map.
      ...(options.failFast ? { clusterRetryStrategy: (times: number) => (times > 3 ? null : 200 * times) } : {}),
    };
    client = new Cluster(
      settings.nodes.map((n) => ({ host: n.host, port: n.port })),
      clusterOptions,
    );
  } else if (settings.mode === 'sentinel') {
    client = new SentinelRedis({
      ...common,
      sentinels: settings.nodes.map((n) => ({ host: n.host, port: n.port })),
      name: settings.sentinelName!,
      db: settings.db,
      role: 'master',
      ...(settings.sentinelPassword ? { sentinelPassword: settings.sentinelPassword.reveal() } : {}),
      ...(settings.tls
        ? { enableTLSForSentinelMode: true, sentinelTLS: settings.tls.ca ? { ca: settings.tls.ca } : {} }
        : {}),
      // Subscribe to the sentinels' +switch-master and reconnect to the new primary as soon as a
      // failover is announced. Without it, clients keep writing to the old primary until the
      // sentinels demote it, seconds later, and those writes are lost (seen in the failover test:
      // a whole batch finished on the old primary, then reverted to 43 of 300).
      failoverDetector: true,
      // A demoted primary answers writes with READONLY until we reconnect: reconnect through
      // the sentinels and re-send the command (2) instead of failing it.
      reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
    });
  } else {
    const node = settings.nodes[0]!;
    client = new Redis({ ...common, host: node.host, port: node.port, db: settings.db, lazyConnect: false });
  }
  // Connection errors reach callers through their commands (and checkRedis); without a listener
  // ioredis would also print every reconnect attempt to stderr. Connection-state logging (one
  // line per state change during an outage) belongs here: every connection is made above.
  client.on('error', () => {});
  if (client instanceof Cluster) client.on('node error', () => {});
  return client;
}

/**
 * A connection of its own with `redis`'s settings (standalone, Sentinel or Cluster): a
 * subscription needs one, as it can take no other command while subscribed.
 */
export function duplicateOf(redis: RedisClient): RedisClient {
  // The same call on both, narrowed: ioredis types Redis#duplicate and Cluster#duplicate apart.
  const client: RedisClient = redis instanceof Cluster ? redis.duplicate() : redis.duplicate();
  client.on('error', () => {});
  return client;
}

/** The master nodes of a cluster (each checked and scanned on its own), or the one server. */
export function serversOf(redis: RedisClient): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/** Resolves once Redis answers PING, or throws a RedisUnavailableError naming where and the setting to fix. */
export async function checkRedis(redis: RedisClient, where: RedisConnection, timeoutMs = 3_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.ping(),
      new Promise((_, reject) => {
        timer = clock.setTimeout(() => reject(new Error('timed out')), timeoutMs);
      }),
    ]);
  } catch (err) {
    throw new RedisUnavailableError(where.display, err, where.setting);
  } finally {
    clock.clearTimeout(timer);
  }
}

/**
 * Evicted keys are lost paid results: anything but `noeviction` is refused unless the operator
 * says otherwise. Managed Redis services may forbid CONFIG; then INFO memory tells the policy.
 */
export async function checkEvictionPolicy(redis: RedisClient): Promise<string | undefined> {
  try {
    const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as [string, string];
    return policy;
  } catch {
    const info = await redis.info('memory').catch(() => '');
    return /maxmemory_policy:(\S+)/.exec(info)?.[1];
  }
}

/**
 * Start-up check shared by every command that uses the queue: Redis answers (else one line naming
 * the setting), and it will not evict our keys (else refuse, unless VQ_ALLOW_EVICTION says go on).
 * In a cluster every master is asked: the slot may move to any of them.
 */
export async function preflightRedis(
  redis: RedisClient,
  settings: { redis: RedisConnection; allowEviction: boolean },
  warn: (message: string) => void = () => {},
): Promise<void> {
  await checkRedis(redis, settings.redis);
  for (const server of serversOf(redis)) {
    const policy = await checkEvictionPolicy(server);
    if (policy === undefined || policy === 'noeviction') continue;
    const where = redis instanceof Cluster ? ` on ${server.options.host}:${server.options.port}` : '';
    const message =
      `Redis maxmemory-policy is ${policy}${where}: under memory pressure Redis ` +
      `deletes keys, and a deleted key is a lost paid result or a job that never finishes. Set ` +
      `maxmemory-policy noeviction (or VQ_ALLOW_EVICTION=true to start anyway)`;
    if (!settings.allowEviction) throw new VqbError('REDIS_EVICTION_POLICY', message);
    warn(message);
  }
}

/**
 * Deletes every key whose name starts with `prefix` (SCAN + UNLINK, bounded memory); returns how
 * many. In a cluster, SCAN sees one node's keys only: every master is scanned, and keys are
 * unlinked one by one on it (a multi-key UNLINK across slots is refused there).
 */
export async function deleteKeysByPrefix(redis: RedisClient, prefix: string): Promise<number> {
  let deleted = 0;
  const cluster = redis instanceof Cluster;
  const glob = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&');
  // A deployment prefix `{p}` also names its accounts' keys `p:{…}` (keys.ts): those go too.
  const tag = /^\{([^{}]+)\}(:|$)/.exec(prefix)?.[1];
  const matches = [`${glob(prefix)}*`, ...(tag !== undefined ? [`${glob(tag)}:{*`] : [])];
  for (const server of serversOf(redis))
    for (const match of matches) {
      let cursor = '0';
      do {
        const [next, keys] = await server.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        if (keys.length === 0) continue;
        if (!cluster) deleted += await server.unlink(...keys);
        else {
          const results = (await server.pipeline(keys.map((key) => ['unlink', key])).exec()) ?? [];
          for (const [err, n] of results) if (!err) deleted += Number(n);
        }
      } while (cursor !== '0');
    }
  return deleted;
}

export { VqbKeys } from './keys.js';

/**
 * For long-lived processes (`vqb work`, `vqb serve`): started while Redis is away (a restart, a failover, services
 * coming up in any order) it waits for Redis, saying so once, instead of exiting. A Redis that
 * answers but may evict keys is still refused at once. False when told to stop while waiting.
 */
export async function waitForRedisAtStart(
  config: Pick<Config, 'redis' | 'allowEviction'>,
  logger: Pick<Logger, 'info' | 'warn'>,
  stop: Promise<unknown>,
): Promise<boolean> {
  let said = false;
  for (;;) {
    const probe = connectRedis(config.redis, { failFast: true });
    try {
      await preflightRedis(probe, config, (message) => logger.warn(message));
      if (said) logger.info('redis reachable: starting');
      return true;
    } catch (err) {
      if (!isError(err, RedisUnavailableError)) throw err;
      if (!said) logger.warn({ redis: 'down' }, `${err.message}: waiting for it`);
      said = true;
    } finally {
      probe.disconnect();
    }
    let timer: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([
      stop.then(() => true),
      new Promise<false>((r) => (timer = clock.setTimeout(() => r(false), 1_000))),
    ]);
    clock.clearTimeout(timer);
    if (stopped) return false;
  }
}
