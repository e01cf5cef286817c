// The queue-side parts every producer and command needs, opened once from a Config and closed
// together: the Redis connection, the plate queue, and the stores over them.
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { BatchStore } from './batches.js';
import { InFlight } from './inflight.js';
import { LineControl } from './line.js';
import { OutcomeStore } from './outcomes.js';
import { createPlateQueue, type PlateQueue } from './plate-queue.js';
import { connectRedis, preflightRedis, VqbKeys } from './redis.js';

export interface QueueServices {
  config: Config;
  redis: Redis;
  keys: VqbKeys;
  queue: PlateQueue;
  batches: BatchStore;
  outcomes: OutcomeStore;
  inflight: InFlight;
  line: LineControl;
  close(): Promise<void>;
}

export async function openQueueServices(config: Config, options: { failFast?: boolean; now?: () => number; warn?: (message: string) => void } = {}): Promise<QueueServices> {
  const redis = connectRedis(config.redisUrl, { failFast: options.failFast ?? true, name: 'vqb-producer' });
  try {
    await preflightRedis(redis, config, options.warn);
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  const keys = new VqbKeys(config);
  const queue = createPlateQueue(config, redis);
  const now = options.now ?? Date.now;
  return {
    config,
    redis,
    keys,
    queue,
    batches: new BatchStore(redis, keys, queue, now),
    outcomes: new OutcomeStore(redis, keys),
    inflight: new InFlight(redis, keys, config.maxInFlight, queue.toKey('')),
    line: new LineControl(queue, redis, keys, now),
    async close() {
      await queue.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** Opens the services, runs `work` with them, and closes them whatever happens. */
export async function withQueueServices<T>(config: Config, work: (services: QueueServices) => Promise<T>): Promise<T> {
  const services = await openQueueServices(config);
  try {
    return await work(services);
  } finally {
    await services.close();
  }
}
