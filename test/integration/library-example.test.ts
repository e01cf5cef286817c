// The library example of docs/library.md, run as a user would: extracted from the page, executed with
// node against the built package (self-referenced as 'vqb'), the simulator and real Redis; and
// type-checked as a TypeScript user's code against the built declarations (dist/*.d.ts).
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { useHarness } from '../helpers/engine.js';
import { runNodeProgram } from '../helpers/process.js';

const ROOT = resolve(import.meta.dirname, '../..');
const harness = useHarness();

async function example(): Promise<string> {
  const page = await readFile(join(ROOT, 'docs/library.md'), 'utf8');
  const code = /<!-- example:library -->\s*```js\n([\s\S]*?)```/.exec(page)?.[1];
  expect(code, 'docs/library.md has the library example block').toBeDefined();
  return code!;
}

describe('the library example (docs/library.md)', () => {
  it('the library example type-checks as TypeScript against the built declarations (strict, skipLibCheck false)', async () => {
    await mkdir(join(ROOT, 'out'), { recursive: true });
    // Inside the package, so 'vqb' resolves to itself through package.json "exports" (dist/src/index.d.ts).
    const dir = await mkdtemp(join(ROOT, 'out', 'readme-types-'));
    try {
      await writeFile(join(dir, 'example.mts'), await example());
      const compilerOptions = {
        strict: true,
        noUncheckedIndexedAccess: true,
        exactOptionalPropertyTypes: true,
        skipLibCheck: false,
        noEmit: true,
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        types: ['node'],
      };
      await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['example.mts'] }));
      const tsc = await promisify(execFile)(process.execPath, [
        join(ROOT, 'node_modules/typescript/bin/tsc'),
        '-p',
        dir,
      ]).catch((err: { stdout: string }) => err);
      expect(tsc.stdout).toBe('');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('the library example runs and does what it says', async () => {
    const code = await example();
    const h = await harness.start({ label: 'readme', workers: 0 });
    const dir = join(ROOT, 'out');
    await mkdir(dir, { recursive: true });
    // Inside the package (so 'vqb' resolves to itself), in a folder of its own that goes with the test.
    const folder = await mkdtemp(join(dir, 'readme-example-'));
    onTestFinished(() => rm(folder, { recursive: true, force: true }));
    const file = join(folder, 'example.mjs');
    await writeFile(file, code);
    const { exit, stdout, stderr } = await runNodeProgram(h, file, [], { LOG_LEVEL: 'warn' });
    expect(stderr).toBe('');
    expect(exit).toBe(0);
    expect(stdout).toContain('2 done, 1 rejected');
    expect(stdout).toMatch(/XYZ9876 done COMPLETED customer=42/);
    expect(h.sim.stats().creates).toBe(2);
  }, 60_000);
});
