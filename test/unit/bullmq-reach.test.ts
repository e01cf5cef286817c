// BullMQ's internals (its key names, its job hash fields, its Worker's and backend's private
// members) are named in one module only, src/engine/bullmq/, and in the Lua files it hands BullMQ's
// keys to (issue 45): an upgrade is then audited in one place, against its contract test
// (test/integration/bullmq-contract.test.ts). Everything else uses BullMQ's public API.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OWNED_SCRIPTS } from '../../src/engine/bullmq/keys.js';

const ROOT = join(import.meta.dirname, '../..');
const MODULE = 'src/engine/bullmq/';
const LUA = 'src/redis/lua/';

function files(dir: string, ext: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = `${dir}${name}`;
    return statSync(join(ROOT, path)).isDirectory() ? files(`${path}/`, ext) : name.endsWith(ext) ? [path] : [];
  });
}

/** What names a BullMQ internal in TypeScript, and what it is. */
const TS_REACHES: [RegExp, string][] = [
  [/\.toKey\(/, "a BullMQ key built by hand (Queue's toKey)"],
  [/queueQualifiedName/, "a job's key built by hand"],
  [/\bjob\w*[^\n]*:lock\b/i, "a job's lock key"],
  [/['"](marker|limiter|prioritized|stalled-check|waiting-children|meta|pc|de)['"]\s*\)/, 'a BullMQ key type'],
  [/\bh(get|set|mget|setnx|del)\([^)\n]*['"](data|priority|processedOn|attemptsMade)['"]/, 'a BullMQ job hash field'],
  [/\b(mainLoopQueue|_concurrency|asyncFifoQueue|blockUntil|limitUntil)\b/, "a Worker's private member"],
  [
    /\b(waitForJob|disconnectBlocking|reconnectBlocking|moveStalledJobsToWait|createRedisBackend|blockingConnection)\b/,
    "a BullMQ backend's method",
  ],
];

/** What names a BullMQ internal in Lua. */
const LUA_REACHES: [RegExp, string][] = [
  [/['"](data|priority|processedOn|attemptsMade|opts)['"]/, 'a BullMQ job hash field'],
  [/:lock['"]/, "a job's lock key"],
  [/\bmarker\b/i, "BullMQ's marker"],
];

function strays(list: string[], reaches: [RegExp, string][], allowed: (file: string) => boolean): string[] {
  return list.flatMap((file) => {
    if (allowed(file)) return [];
    const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
    return lines.flatMap((line, i) =>
      reaches.filter(([re]) => re.test(line)).map(([, what]) => `${file}:${i + 1}: ${what}: ${line.trim()}`),
    );
  });
}

describe("BullMQ's internals are named in src/engine/bullmq/ only", () => {
  it('no TypeScript file outside it names a BullMQ key, job hash field or private member', () => {
    expect(
      strays([...files('src/', '.ts'), ...files('workers/', '.ts')], TS_REACHES, (f) => f.startsWith(MODULE)),
    ).toEqual([]);
  });

  it('no Lua file but the ones it owns reads a BullMQ job hash field, lock or marker', () => {
    const owned = new Set(OWNED_SCRIPTS.map((f) => `${LUA}${f}`));
    expect(strays(files(LUA, '.lua'), LUA_REACHES, (f) => owned.has(f))).toEqual([]);
  });

  it('the Lua files it owns exist', () => {
    expect(OWNED_SCRIPTS.filter((f) => !existsSync(join(ROOT, LUA, f)))).toEqual([]);
  });

  it('the scan finds each kind of reach (checked on the lines vqb had before issue 45)', () => {
    const before = [
      "      prioritized: queue.toKey('prioritized'),",
      "    const key = [job.queueQualifiedName, job.id].join(':');",
      '    const loop = (this.#worker as unknown as { mainLoopQueue?: { add(p: Promise<unknown>): void } })',
      '      backend.waitForJob = async (blockTimeoutS: number) => {',
      '      const moveStalled = backend.moveStalledJobsToWait.bind(backend);',
      "    await redis.hset(jobKey, 'data', json);",
    ];
    for (const line of before)
      expect(
        TS_REACHES.some(([re]) => re.test(line)),
        line,
      ).toBe(true);
    expect(LUA_REACHES.some(([re]) => re.test("  local raw = redis.call('HGET', KEYS[1], 'data')"))).toBe(true);
  });
});
