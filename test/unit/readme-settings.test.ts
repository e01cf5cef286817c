// The README's configuration table is the operator's reference: every setting must be in it.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config.js';

describe('README configuration table', () => {
  const readme = readFileSync(resolve(import.meta.dirname, '../../README.md'), 'utf8');
  it.each(Object.keys(SETTINGS))('documents %s', (name) => {
    expect(readme).toMatch(new RegExp(`^\\| \`${name}\` \\|`, 'm'));
  });
});
