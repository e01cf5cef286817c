// `npm install && npm run demo` on a machine where no Redis runs: the demo starts a throwaway
// redis-server of its own, or says in one line how to get one. The shared Redis answers on 6379
// here, so the tests point the demo's idea of the default address at a port with nothing on it.
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { probePort } from '../../src/redis/server.js';
import { freePort, spawnVqb } from '../helpers/process.js';

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/**
 * The quick start's sample of what `npm run demo` prints, one pattern per line: `…` stands for
 * anything and numbers may differ; the progress bar line (a terminal only) is left out.
 */
async function readmeSample(): Promise<RegExp[]> {
  const readme = await readFile(resolve(import.meta.dirname, '../../README.md'), 'utf8');
  const lines = readme.slice(readme.indexOf('## Quick start')).split('\n');
  // The first fenced block without a language (the one before it is ```sh).
  let open = -1;
  for (let i = 0, inside = false; i < lines.length && open < 0; i++) {
    if (!lines[i]!.startsWith('```')) continue;
    if (!inside && lines[i] === '```') open = i;
    inside = !inside;
  }
  const close = lines.indexOf('```', open + 1);
  expect(open).toBeGreaterThan(0);
  const number = /\d+(?:\\\.\d+)?/g;
  return lines
    .slice(open + 1, close)
    .filter((line) => !line.startsWith('█'))
    .map((line) => {
      const parts = line
        .split('…')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(number, '\\d+(?:\\.\\d+)?'));
      return new RegExp(`^${parts.join('.*')}$`);
    });
}

describe('vqb demo without a running Redis', () => {
  it('starts a throwaway redis-server, runs the sample batch to the end on it, and stops it', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vqb-demo-'));
    const nothing = await freePort();
    expect(await probePort('127.0.0.1', nothing)).toBe('refused');
    // No REDIS_URL: the demo looks at its default address, and finds nothing there.
    const env = {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'warn',
      VQB_TEST_DEFAULT_REDIS_URL: `redis://127.0.0.1:${nothing}`,
    };
    const { code, stdout, stderr } = await spawnVqb(['demo', '--out', join(dir, 'out')], env, 90_000).done;
    expect(stderr).toBe('');
    expect(code).toBe(0);

    const started = new RegExp(
      `^no Redis on 127\\.0\\.0\\.1:${nothing}: started a throwaway redis-server on (redis://127\\.0\\.0\\.1:(\\d+)) `,
      'm',
    ).exec(stdout);
    expect(started, stdout).not.toBeNull();
    const [, url, port] = started as RegExpExecArray;
    // The batch ran on that server, to the end.
    expect(stdout).toContain(`Redis at ${url};`);
    expect(stdout).toMatch(/270 done, 5 failed/);
    const csv = /^\s+(\S+\.csv)$/m.exec(stdout)?.[1];
    expect(csv).toBeDefined();
    await access(csv!);
    // The CSV opens in columns: one row per input row (plus the header), the carried column, the result's fields.
    const lines = (await readFile(csv!, 'utf8'))
      .replace(/^\uFEFF/, '')
      .trimEnd()
      .split('\r\n');
    expect(lines[0]!.split(';').slice(0, 4)).toEqual(['row', 'input', 'plate', 'status']);
    expect(lines[0]).toContain('cliente');
    expect(lines[0]).toContain('result.result.brand');
    const input = await readFile(join(import.meta.dirname, '../../samples/plates.csv'), 'utf8');
    expect(lines).toHaveLength(input.trimEnd().split('\r\n').length);
    // And the server is gone with the demo.
    expect(await probePort('127.0.0.1', Number(port))).toBe('refused');

    // Apart from that first line, the output is the README's sample (no progress bar: not a terminal).
    const printed = stdout.split('\n').filter((line) => line !== '' && !line.startsWith('no Redis on'));
    const sample = await readmeSample();
    expect(printed).toHaveLength(sample.length);
    printed.forEach((line, i) => {
      expect(line).toMatch(sample[i]!);
    });
  }, 120_000);

  it('says in one line how to get redis-server when it is not installed', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vqb-demo-'));
    const nothing = await freePort();
    // A PATH with no redis-server on it (node itself is spawned by its full path).
    const env = { PATH: dir, LOG_LEVEL: 'warn', VQB_TEST_DEFAULT_REDIS_URL: `redis://127.0.0.1:${nothing}` };
    const { code, stdout, stderr } = await spawnVqb(['demo', '--out', join(dir, 'out')], env, 30_000).done;
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      `vqb: no Redis on 127.0.0.1:${nothing} and redis-server is not installed: \`apt-get install redis-server\` (or set REDIS_URL)\n`,
    );
  });
});
