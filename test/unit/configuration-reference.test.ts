// docs/configuration.md is the operator's reference: every setting must be in its table.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config.js';

describe('the configuration reference (docs/configuration.md)', () => {
  const readme = readFileSync(resolve(import.meta.dirname, '../../docs/configuration.md'), 'utf8');
  it.each(Object.keys(SETTINGS))('documents %s', (name) => {
    expect(readme).toMatch(new RegExp(`^\\| \`${name}\` \\|`, 'm'));
  });
});
