// The key file: read when it changes, checked before it is sent, and a file that cannot be read is
// a ConfigError naming it (the job goes back; nothing is sent with a broken header).
import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { createKeyProvider } from '../../src/upstream/key.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vqb-key-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('createKeyProvider (file)', () => {
  it('reads the key once, and again only when the file changes', async () => {
    const path = join(dir, 'key');
    await writeFile(path, 'first-key\n');
    const read = createKeyProvider({ kind: 'file', path });
    expect(await read()).toBe('first-key');
    expect(await read()).toBe('first-key');
    await writeFile(path, 'second-key\n');
    await utimes(path, new Date(), new Date(Date.now() + 5_000));
    expect(await read()).toBe('second-key');
  });

  it('a missing, empty or two-line file is a ConfigError naming it', async () => {
    const path = join(dir, 'key');
    const read = createKeyProvider({ kind: 'file', path });
    await expect(read()).rejects.toThrow(ConfigError);
    await expect(read()).rejects.toThrow(`cannot read the key file ${path}`);
    await writeFile(path, '  \n');
    await expect(read()).rejects.toThrow(`the key file ${path} is empty`);
    await writeFile(path, 'key\nlabel: prod\n');
    await expect(read()).rejects.toThrow('must hold only the key, on one line');
  });
});
