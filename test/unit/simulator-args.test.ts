import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isVqbError } from '../../src/errors.js';
import { parseRange, parseSimulatorArgs } from '../../src/simulator/args.js';
import { resolveOptions } from '../../src/simulator/options.js';

const dir = mkdtempSync(join(tmpdir(), 'vqb-sim-args-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('parseSimulatorArgs', () => {
  it('maps every flag to its option', () => {
    const options = parseSimulatorArgs([
      '--port',
      '8099',
      '--host',
      '0.0.0.0',
      '--products',
      'agregados,renainf',
      '--key',
      'k1',
      '--key',
      'k2:view_queries,run_batch',
      '--rate-limit',
      '5/s',
      '--window',
      'token-bucket',
      '--daily-quota',
      '10',
      '--quota-window',
      '30s',
      '--completion',
      '100-400',
      '--fail-rate',
      '0.1',
      '--fail-plates',
      'abc-1234, XYZ9K87',
      '--terminal-on-create-rate',
      '0.5',
      '--query-ttl',
      '10m',
      '--no-envelope',
      '--id-field',
      'id',
      '--error-rate',
      '0.05',
      '--latency',
      '1s-2s',
      '--drop-rate',
      '0.01',
      '--drop-after-create-rate',
      '0.02',
      '--max-body',
      '2048',
    ]);
    expect(options).toEqual({
      port: 8099,
      host: '0.0.0.0',
      products: ['agregados', 'renainf'],
      keys: [{ key: 'k1' }, { key: 'k2', permissions: ['view_queries', 'run_batch'] }],
      rateLimit: '5/s',
      window: 'token-bucket',
      dailyQuota: 10,
      quotaWindowMs: 30_000,
      completionMs: [100, 400],
      failRate: 0.1,
      failPlates: ['ABC1234', 'XYZ9K87'],
      terminalOnCreateRate: 0.5,
      queryTtlMs: 600_000,
      envelope: false,
      idField: 'id',
      errorRate: 0.05,
      latencyMs: [1000, 2000],
      dropRate: 0.01,
      dropAfterCreateRate: 0.02,
      maxBodyBytes: 2048,
    });
  });

  it('reads --config and lets flags override it', () => {
    const file = join(dir, 'sim.json');
    writeFileSync(
      file,
      JSON.stringify({
        rateLimit: '60/min',
        failRate: 0.5,
        keys: [{ key: 'file-key', permissions: ['run_queries'], expiresAt: '2031-01-01T00:00:00Z' }],
      }),
    );
    expect(parseSimulatorArgs(['--config', file, '--fail-rate', '0'])).toEqual({
      rateLimit: '60/min',
      failRate: 0,
      keys: [{ key: 'file-key', permissions: ['run_queries'], expiresAt: '2031-01-01T00:00:00Z' }],
    });
  });

  it('rejects bad values with an error naming the flag or field', () => {
    const bad: Array<[string[], RegExp]> = [
      [['--rate-limit', 'lots'], /rateLimit/],
      [['--window', 'leaky'], /window/],
      [['--fail-rate', '2'], /failRate/],
      [['--fail-rate', 'x'], /--fail-rate/],
      [['--fail-plates', 'NOPE'], /failPlates/],
      [['--key', 'k:fly'], /unknown permission "fly"/],
      [['--completion', '400-100'], /completionMs/],
      [['--bogus'], /bogus/],
      [['--config', join(dir, 'missing.json')], /--config/],
    ];
    for (const [argv, message] of bad) {
      let caught: unknown;
      try {
        parseSimulatorArgs(argv);
      } catch (error) {
        caught = error;
      }
      expect(isVqbError(caught), argv.join(' ')).toBe(true);
      expect((caught as Error).message).toMatch(message);
    }
  });

  it('parses ranges with a shared unit', () => {
    expect(parseRange('x', '50-200ms')).toEqual([50, 200]);
    expect(parseRange('x', '1s-1500ms')).toEqual([1000, 1500]);
    expect(parseRange('x', '250')).toEqual([250, 250]);
    expect(parseRange('x', '100,400')).toEqual([100, 400]);
  });

  it('defaults match the contract notes', () => {
    const o = resolveOptions();
    expect(o).toMatchObject({
      host: '127.0.0.1',
      port: 0,
      rateLimit: '600/min',
      window: 'sliding',
      dailyQuota: 100_000,
      completionMs: [5000, 15000],
    });
    expect(o.keys.map((k) => k.key)).toEqual(['demo-key', 'demo-view-only', 'demo-expired']);
  });
});
