// Small pieces every benchmark step shares: plates, sleeping, the Redis prefix of a step and its
// removal, Redis memory readings, and what machine the figures came from.
import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { Redis } from 'ioredis';
import type { RedisClient } from '../src/redis/connection.js';
import { deleteKeysByPrefix } from '../src/redis/connection.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The key the simulator knows and every client (ours and the peer) sends. */
export const BENCH_KEY = 'bench-key-0123456789abcdef';

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

const LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** The i-th distinct Mercosul plate (`ABC1D23`); distinct for i below 457,600,000. */
export function plateAt(i: number): string {
  const d2 = i % 100;
  let rest = Math.floor(i / 100);
  const l = rest % 26;
  rest = Math.floor(rest / 26);
  const d1 = rest % 10;
  rest = Math.floor(rest / 10);
  const a = rest % 26;
  const b = Math.floor(rest / 26) % 26;
  const c = Math.floor(rest / 676) % 26;
  return `${LETTERS[c]}${LETTERS[b]}${LETTERS[a]}${d1}${LETTERS[l]}${String(d2).padStart(2, '0')}`;
}

/** `count` distinct plates starting at index `from` (steps use disjoint ranges). */
export function platesFrom(from: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => plateAt(from + i));
}

/** A key prefix of the bench's own; the `{hash tag}` keeps it one Cluster slot, like `{vqb}`. */
export function benchPrefix(label: string): string {
  const prefix = `{vqbbench-${label}-${randomBytes(4).toString('hex')}}`;
  prefixesInUse.add(prefix);
  return prefix;
}

/** Prefixes made and not yet deleted: an interrupted run deletes them on the way out. */
export const prefixesInUse = new Set<string>();

export function connect(): Redis {
  return new Redis(REDIS_URL, { maxRetriesPerRequest: 2, connectionName: 'vqb-bench' });
}

/** Deletes every key under `prefix` (SCAN + UNLINK), as the tests do; returns how many. */
export async function deleteByPrefix(redis: RedisClient, prefix: string): Promise<number> {
  const deleted = await deleteKeysByPrefix(redis, prefix);
  prefixesInUse.delete(prefix);
  return deleted;
}

function infoField(info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

export async function usedMemory(redis: RedisClient): Promise<number> {
  return Number(infoField(await redis.info('memory'), 'used_memory') ?? NaN);
}

/**
 * Bytes Redis reports for the keys under `prefix` (`MEMORY USAGE … SAMPLES 0`, every element
 * counted), summed by the group `groupOf` names for each key. Independent of other clients' writes,
 * unlike used_memory; it leaves out the allocator's and Redis's own overhead.
 */
export async function keyBytes(
  redis: RedisClient,
  prefix: string,
  groupOf: (key: string) => string,
): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const glob = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&');
  // Both homes: the prefix's own slot ({p}…) and the accounts' slots (p:{queue.account}…), where a
  // batch's keys have lived since issue 21 (matching only the first priced nothing).
  const bare = prefix.replace(/[{}]/g, '');
  const patterns = bare === prefix ? [`${glob(prefix)}*`] : [`${glob(prefix)}*`, `${glob(bare)}:{*`];
  for (const pattern of patterns) {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      const pipeline = redis.pipeline();
      for (const key of keys) pipeline.memory('USAGE', key, 'SAMPLES', 0);
      const replies = (await pipeline.exec()) ?? [];
      keys.forEach((key, i) => {
        const group = groupOf(key);
        out[group] = (out[group] ?? 0) + Number(replies[i]?.[1] ?? 0);
      });
    } while (cursor !== '0');
  }
  return out;
}

/** Waits until UNLINKed keys are really freed, so the next memory reading starts clean. */
export async function settleMemory(redis: RedisClient, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (Number(infoField(await redis.info('memory'), 'lazyfree_pending_objects') ?? 0) === 0) return;
    await sleep(200);
  }
}

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  node: string;
  redis: string;
  platform: string;
}

export async function machineInfo(redis: RedisClient): Promise<MachineInfo> {
  const list = cpus();
  return {
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    redis: infoField(await redis.info('server'), 'redis_version') ?? 'unknown',
    platform: `${process.platform} ${process.arch}`,
  };
}
