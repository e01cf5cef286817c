// Redis connections: how vqb connects, and the start-up checks every command runs. The names of
// the keys live in keys.ts.
import { type Cluster, Redis } from 'ioredis';
import { RedisUnavailableError, VqbError } from '../errors.js';

/** A connection to standalone Redis (also through Sentinel) or to a Redis Cluster: vqb's keys share one hash slot, so every command and script works on either. */
export type RedisClient = Redis | Cluster;

export interface RedisSettings {
  redisUrl: string;
  prefix: string;
  queueName: string;
}

/**
 * BullMQ workers need `maxRetriesPerRequest: null` (blocking commands must wait out reconnects).
 * Short-lived commands (status, enqueue) want to fail fast instead, hence `failFast`.
 */
export function connectRedis(url: string, options: { failFast?: boolean; name?: string } = {}): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: options.failFast ? 2 : null,
    enableOfflineQueue: true,
    connectionName: options.name ?? 'vqb',
    lazyConnect: false,
  });
  // Connection errors reach callers through their commands (and checkRedis); without a listener
  // ioredis would also print every reconnect attempt to stderr.
  redis.on('error', () => {});
  return redis;
}

/** Resolves once Redis answers PING, or throws a RedisUnavailableError naming REDIS_URL. */
export async function checkRedis(redis: RedisClient, url: string, timeoutMs = 3_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timed out')), timeoutMs);
      }),
    ]);
  } catch (err) {
    throw new RedisUnavailableError(url.replace(/\/\/[^@/]*@/, '//***@'), err);
  } finally {
    clearTimeout(timer);
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
 * REDIS_URL), and it will not evict our keys (else refuse, unless VQ_ALLOW_EVICTION says go on).
 */
export async function preflightRedis(redis: RedisClient, settings: { redisUrl: string; allowEviction: boolean }, warn: (message: string) => void = () => {}): Promise<void> {
  await checkRedis(redis, settings.redisUrl);
  const policy = await checkEvictionPolicy(redis);
  if (policy === undefined || policy === 'noeviction') return;
  const message = `Redis maxmemory-policy is ${policy}: under memory pressure Redis deletes keys, and a deleted key is a lost paid result or a job that never finishes. Set maxmemory-policy noeviction (or VQ_ALLOW_EVICTION=true to start anyway)`;
  if (!settings.allowEviction) throw new VqbError('REDIS_EVICTION_POLICY', message);
  warn(message);
}

/** Deletes every key whose name starts with `prefix` (SCAN + UNLINK, bounded memory); returns how many. */
export async function deleteKeysByPrefix(redis: RedisClient, prefix: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) deleted += await redis.unlink(...keys);
  } while (cursor !== '0');
  return deleted;
}

export { VqbKeys } from './keys.js';
