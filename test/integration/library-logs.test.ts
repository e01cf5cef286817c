// vqb as a library in someone else's program: it writes no log line to the application's stdout or
// stderr unless the application hands it a logger, and a logger handed in receives vqb's lines.
// The first case runs a program against the built package (self-referenced as 'vqb', as an
// application imports it; needs `npm run build`): pino writes to the file descriptor itself, past
// anything a test could patch in-process.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createVqb } from '../../src/index.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { runNodeProgram } from '../helpers/process.js';

const ROOT = resolve(import.meta.dirname, '../..');
const harness = useHarness();

const PROGRAM = `
import { createVqb } from 'vqb';
const vqb = await createVqb({ workers: true });
const batch = await vqb.enqueue(process.argv.slice(2));
const info = await batch.done({ timeoutMs: 30000 });
await vqb.close();
process.stdout.write(\`app: \${info.counts.done} done\\n\`);
`;

describe('the library and logs', () => {
  it('without a logger, a program using the library sees only its own output (LOG_LEVEL=info set)', async () => {
    const h = await harness.start({ label: 'lib-logs', workers: 0 });
    await mkdir(join(ROOT, 'out'), { recursive: true });
    const folder = await mkdtemp(join(ROOT, 'out', 'library-logs-'));
    onTestFinished(() => rm(folder, { recursive: true, force: true }));
    const file = join(folder, 'app.mjs');
    await writeFile(file, PROGRAM);
    const { exit, stdout, stderr } = await runNodeProgram(h, file, makePlates(3), { LOG_LEVEL: 'info' });
    expect(stderr).toBe('');
    expect(stdout).toBe('app: 3 done\n');
    expect(exit).toBe(0);
  }, 60_000);

  it("a pino logger handed in receives vqb's lines, and nothing reaches stdout", async () => {
    const h = await harness.start({ label: 'lib-logger', workers: 0 });
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const written: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      written.push(String(chunk));
      return write(chunk, ...rest);
    }) as typeof process.stdout.write;
    onTestFinished(() => {
      process.stdout.write = write;
    });
    const vqb = await createVqb({ config: h.config, logger: pino({ level: 'info' }, stream), workers: true });
    try {
      const batch = await vqb.enqueue(makePlates(3, 500));
      await batch.done({ timeoutMs: 30_000 });
    } finally {
      await vqb.close();
    }
    expect(lines.map((l) => l.msg)).toContain('batch finished');
    expect(written.filter((w) => w.includes('batch finished'))).toEqual([]);
  }, 60_000);
});
