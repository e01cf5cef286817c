// What a `vqb` command loads to start (a real process: module loading is the process's own).
// Every command is a module of its own, loaded when it is run, and exceljs only when a workbook
// is read or written: `vqb --help` loaded every command for its one-line summary (1.03 s), and a
// static exceljs import put a quarter of a second of CPU on every start (`vqb status` 0.82 s).
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const BIN = resolve(ROOT, 'bin/vqb.js');
const HOOK = resolve(ROOT, 'test/helpers/record-loads.mjs');

/** What `vqb <args>` resolved: vqb's own files (`dist/…`) and the packages it loaded. */
async function loadedBy(args: string[]): Promise<{ files: string[]; packages: Set<string> }> {
  const { stderr } = await promisify(execFile)(process.execPath, ['--import', HOOK, BIN, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH },
  }).catch((err: { stderr?: string }) => ({ stderr: err.stderr ?? '' }));
  const line = stderr.split('\n').find((l) => l.startsWith('LOADED '));
  if (!line) throw new Error(`no LOADED line in: ${stderr}`);
  const urls = JSON.parse(line.slice('LOADED '.length)) as string[];
  return {
    files: urls
      .filter((url) => url.startsWith(`file://${ROOT}/dist/`))
      .map((url) => url.slice(`file://${ROOT}/`.length)),
    // Wherever node_modules is (a linked one too).
    packages: new Set(urls.flatMap((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? [])),
  };
}

describe('what a command loads to start', () => {
  it('`vqb --help` and a mistyped command load no command module, no queue, no HTTP server', async () => {
    for (const args of [['--help'], ['stauts']]) {
      const { files, packages } = await loadedBy(args);
      expect(files).toContain('dist/src/commands/index.js');
      expect(files.filter((p) => p.startsWith('dist/src/commands/') && p !== 'dist/src/commands/index.js')).toEqual([]);
      for (const heavy of ['bullmq', 'ioredis', 'fastify', 'exceljs', 'undici'])
        expect(packages.has(heavy), heavy).toBe(false);
    }
  });

  it('`vqb status`, `run`, `work` and `serve` start without exceljs', async () => {
    for (const command of ['status', 'run', 'work', 'serve']) {
      const { files, packages } = await loadedBy([command, '--help']);
      expect(files, command).toContain(`dist/src/commands/${command}.js`);
      expect(packages.has('exceljs'), command).toBe(false);
    }
  });
});
