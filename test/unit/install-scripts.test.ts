// Issue 36 (15): `npm install` on a fresh clone prints no install-scripts warning. npm (11.16 on)
// warns about every dependency with an install script not listed in package.json's allowScripts;
// each one the lockfile marks `hasInstallScript` must be decided there (true: run it, false: not).
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');

describe('dependencies with install scripts', () => {
  it('are each allowed or denied in package.json (allowScripts)', async () => {
    const pkg = JSON.parse(await readFile(resolve(root, 'package.json'), 'utf8')) as {
      allowScripts?: Record<string, boolean>;
    };
    const lock = JSON.parse(await readFile(resolve(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { hasInstallScript?: boolean }>;
    };
    const withScripts = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && p.hasInstallScript === true)
      .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(withScripts.length).toBeGreaterThan(0);
    const decided = Object.keys(pkg.allowScripts ?? {}).map((k) => k.replace(/(?<=.)@[^@]*$/, ''));
    expect(withScripts.filter((name) => !decided.includes(name))).toEqual([]);
  });
});
