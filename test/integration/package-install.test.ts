// vqb installed as a package, as `npm install <git url>` or `npm install -g .` leaves it: npm
// builds it (`prepare`) and packs what package.json's `files` names. Here the pack of this tree
// (built by `npm run build`, as `prepare` would), unpacked beside our node_modules: its command
// answers and its library imports. Before `files`, npm packed by .gitignore and left dist/ out.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const run = promisify(execFile);

describe('vqb as an installed package', () => {
  it('builds on install from git (prepare), and its pack holds a working command and library', async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
      scripts: Record<string, string>;
    };
    // npm runs `prepare` in a git dependency's clone (devDependencies installed) before packing it.
    expect(pkg.scripts.prepare).toBe('npm run build');

    await mkdir(join(ROOT, 'out'), { recursive: true });
    const dir = await mkdtemp(join(ROOT, 'out', 'package-install-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    // --ignore-scripts: dist/ is built already; the pack is what `files` lets through.
    const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: ROOT });
    const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
    await run('tar', ['-xzf', join(dir, filename), '-C', dir]);
    const installed = join(dir, 'package');
    // Its dependencies, as npm would have put them beside it.
    await symlink(join(ROOT, 'node_modules'), join(installed, 'node_modules'));

    const version = await run(process.execPath, [join(installed, 'bin/vqb.js'), '--version'], { cwd: dir });
    expect(version.stdout.trim()).toBe(`vqb ${pkg.version}`);

    // An application's `import … from 'vqb'`: its node_modules/vqb is the installed package.
    const app = join(dir, 'app');
    await mkdir(join(app, 'node_modules'), { recursive: true });
    await symlink(installed, join(app, 'node_modules', 'vqb'));
    const lib = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('vqb'); console.log(typeof m.createVqb, m.normalizePlate('abc-1d23'))",
      ],
      { cwd: app },
    );
    expect(lib.stdout.trim()).toBe('function ABC1D23');
  }, 60_000);
});
