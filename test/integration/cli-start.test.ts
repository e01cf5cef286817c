// What a `vqb` command loads to start (a real process: module loading is the process's own).
// Every command is a module of its own, loaded when it is run, and exceljs only when a workbook
// is read or written: `vqb --help` loaded every command for its one-line summary (1.03 s), and a
// static exceljs import put a quarter of a second of CPU on every start (`vqb status` 0.82 s).
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { modulesLoadedBy } from '../helpers/process.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** What `vqb <args>` resolved: vqb's own files (`dist/…`) and the packages it loaded. */
async function loadedBy(args: string[]): Promise<{ files: string[]; packages: Set<string> }> {
  const urls = await modulesLoadedBy(args);
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
