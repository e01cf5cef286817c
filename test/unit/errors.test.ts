// One way to tell what an error is: a brand per class, inherited, that survives two copies of the
// package (a plain object carrying the registry symbol passes, as undici's check does).
import { describe, expect, it } from 'vitest';
import { ConfigError, InputError, isError, isVqbError, VqbError } from '../../src/errors.js';
import { ExpiredKeyError, isUpstreamError, RateLimitedError, UpstreamError } from '../../src/upstream/errors.js';

describe('error brands', () => {
  it('an instance carries the brand of its class and of every class above it, and no other', () => {
    const input = new InputError('CSV_EMPTY', 'x');
    expect(isError(input, InputError)).toBe(true);
    expect(isVqbError(input)).toBe(true);
    expect(isError(input, ConfigError)).toBe(false);
    expect(isUpstreamError(input)).toBe(false);

    const expired = new ExpiredKeyError('x');
    expect(isUpstreamError(expired) && expired.kind).toBe('expired-key');
    expect(isError(expired, UpstreamError)).toBe(true);
    expect(isVqbError(expired)).toBe(true);
    expect(isUpstreamError(new RateLimitedError('x', 1_000))).toBe(true);
  });

  it('holds across two copies of the package (the brand is a registry symbol), and a look-alike without it fails', () => {
    const fromOtherCopy = Object.assign(new Error('x'), {
      [Symbol.for('vqb.error.InputError')]: true,
      [Symbol.for('vqb.error.VqbError')]: true,
    });
    expect(isError(fromOtherCopy, InputError)).toBe(true);
    expect(isVqbError({ name: 'VqbError', code: 'X', message: 'x' })).toBe(false);
    expect(isVqbError(new VqbError('USAGE', 'x'))).toBe(true);
  });
});
