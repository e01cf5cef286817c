// The runtime vqb supports is written in four places (package.json `engines`, `.nvmrc`, both
// Dockerfile stages, `@types/node`); they must agree, and no installed dependency may need a Node
// that `engines` allows us to run without (issue 22: cookie@2 and content-disposition@3 need 22).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};

/** Every installed package's name, version and `engines.node`, nested node_modules included. */
function installed(dir: string, out: { name: string; version: string; node: string }[] = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name === '.bin') continue;
    const path = join(dir, entry.name);
    if (entry.name.startsWith('@')) {
      installed(path, out);
      continue;
    }
    try {
      const manifest = JSON.parse(readFileSync(join(path, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
        engines?: { node?: string };
      };
      if (manifest.engines?.node)
        out.push({ name: manifest.name, version: manifest.version, node: manifest.engines.node });
    } catch {
      // a folder without a manifest (a package's own data) is not a package
    }
    try {
      installed(join(path, 'node_modules'), out);
    } catch {
      // no nested node_modules
    }
  }
  return out;
}

describe('supported runtime', () => {
  const ours = pkg.engines.node;
  const major = semver.minVersion(ours)?.major;

  it('engines names Node 24 LTS as the oldest supported release', () => {
    expect(major).toBe(24);
  });

  it('.nvmrc, both Dockerfile stages and @types/node name the same major', () => {
    expect(readFileSync(join(ROOT, '.nvmrc'), 'utf8').trim()).toBe(String(major));
    const froms = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').match(/^FROM node:(\d+)/gm) ?? [];
    expect(froms.length).toBe(2);
    for (const from of froms) expect(from).toBe(`FROM node:${major}`);
    expect(semver.minVersion(pkg.devDependencies['@types/node'] ?? '')?.major).toBe(major);
  });

  it('no installed dependency declares a Node newer than engines allows', () => {
    const packages = installed(join(ROOT, 'node_modules'));
    expect(packages.length).toBeGreaterThan(10);
    const misfits = packages
      .filter((p) => !semver.subset(ours, p.node, { includePrerelease: false }))
      .map((p) => `${p.name}@${p.version} needs node ${p.node}`);
    expect(misfits).toEqual([]);
  });

  it('the suite itself runs on a Node that engines allows (CI brings Node 24 where the machine has less)', () => {
    expect(semver.satisfies(process.versions.node, ours), `running on ${process.versions.node}`).toBe(true);
  });
});
