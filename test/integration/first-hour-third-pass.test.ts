// Issue 46, the first hour, third pass: money never moves by accident, and `vqb` says what is true.
// Each test spawns `vqb` as a user does (real Redis, the simulator over HTTP). Needs `npm run build`.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { BIN } from '../helpers/process.js';

/** The machine's own Node 20 where it has one (Debian's), else the launcher told to believe it is 20. */
function oldNode(): { node: string; env: Record<string, string> } {
  const system = '/usr/bin/node';
  if (existsSync(system)) {
    const major = Number(execFileSync(system, ['-p', 'process.versions.node'], { encoding: 'utf8' }).split('.')[0]);
    if (major < 24) return { node: system, env: {} };
  }
  return { node: process.execPath, env: { VQB_TEST_NODE_VERSION: '20.0.0' } };
}

describe('the first hour, third pass (issue 46)', () => {
  it('7: on Node 20, `vqb --version` says in one line which Node it needs and how to get it, exit 2', async () => {
    const { node, env } = oldNode();
    const child = spawn(node, [BIN, '--version'], { env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const [code] = await once(child, 'exit');
    expect(stdout).toBe('');
    expect(stderr).toMatch(/^vqb: needs Node\.js 24 LTS or newer \(this is Node 20\.[\d.]+\); get it with `nvm install 24`/);
    expect(stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(stderr).not.toMatch(/^\s+at /m);
    expect(code).toBe(2);
  });
});
