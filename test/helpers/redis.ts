// Every test that touches Redis gets its own key prefix and deletes every key under it afterwards,
// so tests never see each other's queues and leave nothing behind.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { deleteKeysByPrefix } from '../../src/redis/connection.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface RedisTestContext {
  prefix: string;
  redis: Redis;
  cleanup(): Promise<void>;
}

export const deleteByPrefix = deleteKeysByPrefix;

export async function redisTestContext(label = 'test', url = REDIS_URL): Promise<RedisTestContext> {
  const prefix = `{vqbtest-${label}-${randomBytes(4).toString('hex')}}`;
  const redis = new Redis(url, { maxRetriesPerRequest: 2 });
  return {
    prefix,
    redis,
    async cleanup() {
      await deleteByPrefix(redis, prefix);
      await redis.quit();
    },
  };
}
