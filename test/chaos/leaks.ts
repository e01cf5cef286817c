// Where a secret might end up after a batch, and a search of each: text (process output), every
// Redis key under a prefix (names and values of every type, BullMQ's event streams included), and
// every file under a directory. Used by the chaos suite and test/integration/secrets.test.ts.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RedisClient } from '../../src/redis/connection.js';
import { deploymentPatterns } from '../../src/redis/keys.js';

export interface Leak {
  where: string;
  needle: string;
  excerpt: string;
}

function excerpt(haystack: string, at: number): string {
  return haystack.slice(Math.max(0, at - 80), at + 80).replace(/\s+/g, ' ');
}

/** Occurrences of any needle in a string or in raw bytes (utf8 and latin1 views). */
export function findIn(haystack: string | Buffer, needles: readonly string[], where: string): Leak[] {
  const leaks: Leak[] = [];
  for (const needle of needles) {
    if (typeof haystack === 'string') {
      const at = haystack.indexOf(needle);
      if (at !== -1) leaks.push({ where, needle, excerpt: excerpt(haystack, at) });
    } else {
      const at = haystack.indexOf(needle, 0, 'utf8');
      if (at !== -1) leaks.push({ where, needle, excerpt: excerpt(haystack.toString('latin1'), at) });
    }
  }
  return leaks;
}

export interface RedisScan {
  keys: number;
  byType: Record<string, number>;
  leaks: Leak[];
}

/** SCAN + TYPE + the whole value of every key of the deployment (both homes: keys.ts). */
export async function scanRedis(redis: RedisClient, prefix: string, needles: readonly string[]): Promise<RedisScan> {
  const result: RedisScan = { keys: 0, byType: {}, leaks: [] };
  for (const pattern of deploymentPatterns(prefix)) await scanPattern(redis, pattern, needles, result);
  return result;
}

async function scanPattern(redis: RedisClient, pattern: string, needles: readonly string[], result: RedisScan) {
  let cursor = '0';
  do {
    const [next, names] = await redis.scanBuffer(cursor, 'MATCH', pattern, 'COUNT', 500);
    cursor = next.toString();
    for (const nameBuf of names) {
      const name = nameBuf.toString('utf8');
      result.keys++;
      result.leaks.push(...findIn(nameBuf, needles, `redis key name ${name}`));
      const type = await redis.type(nameBuf);
      result.byType[type] = (result.byType[type] ?? 0) + 1;
      const values: Buffer[] = [];
      switch (type) {
        case 'string': {
          const v = await redis.getBuffer(nameBuf);
          if (v) values.push(v);
          break;
        }
        case 'hash': {
          const flat = await redis.hgetallBuffer(nameBuf);
          for (const [field, v] of Object.entries(flat)) values.push(Buffer.from(field), v);
          break;
        }
        case 'list':
          values.push(...(await redis.lrangeBuffer(nameBuf, 0, -1)));
          break;
        case 'set':
          values.push(...(await redis.smembersBuffer(nameBuf)));
          break;
        case 'zset':
          values.push(...(await redis.zrangeBuffer(nameBuf, 0, '-1')));
          break;
        case 'stream':
          for (const [, fields] of await redis.xrangeBuffer(nameBuf, '-', '+')) values.push(...fields);
          break;
        case 'none':
          break; // expired between SCAN and TYPE
        default:
          throw new Error(`scanRedis: key ${name} has type ${type}, which this scan does not read`);
      }
      for (const v of values) result.leaks.push(...findIn(v, needles, `redis ${type} ${name}`));
    }
  } while (cursor !== '0');
}

/** Every regular file under dir, recursively. */
export async function scanDir(dir: string, needles: readonly string[]): Promise<{ files: number; leaks: Leak[] }> {
  const result = { files: 0, leaks: [] as Leak[] };
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    result.files++;
    result.leaks.push(...findIn(await readFile(path), needles, `file ${path}`));
  }
  return result;
}

/** The key itself and its random part alone, so a truncated or re-encoded key is caught too. */
export function canaryNeedles(key: string): string[] {
  const random = /[0-9a-f]{12,}$/i.exec(key)?.[0];
  return random ? [key, random] : [key];
}
