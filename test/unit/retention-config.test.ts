// VQ_RETAIN and VQ_ARCHIVE_DIR as an operator writes them, and how often the sweep runs for them.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { sweepInterval } from '../../src/retention.js';

describe('retention settings', () => {
  it('keeps finished batches 30 days by default, in <VQ_ROOT>/batches', () => {
    const config = loadConfig({});
    expect(config.retention).toEqual({ retainMs: 30 * 86_400_000, archiveDir: 'data/batches' });
    expect(loadConfig({ VQ_ROOT: '/srv/vqb' }).retention.archiveDir).toBe('/srv/vqb/batches');
    expect(loadConfig({ VQ_ARCHIVE_DIR: '/mnt/archive' }).retention.archiveDir).toBe('/mnt/archive');
  });

  it.each([
    ['12h', 12 * 3_600_000],
    ['7d', 7 * 86_400_000],
    ['0', 0],
    ['off', 0],
    ['never', 0],
  ])('VQ_RETAIN=%s → %d ms', (text, ms) => {
    expect(loadConfig({ VQ_RETAIN: text }).retention.retainMs).toBe(ms);
  });

  it('refuses a VQ_RETAIN that is not a duration, naming the variable', () => {
    expect(() => loadConfig({ VQ_RETAIN: 'a month' })).toThrow(/VQ_RETAIN: .*a duration such as 30d or 12h, or off/);
  });

  it('sweeps a quarter of VQ_RETAIN, between a second and an hour', () => {
    expect(sweepInterval(30 * 86_400_000)).toBe(3_600_000);
    expect(sweepInterval(2 * 3_600_000)).toBe(1_800_000);
    expect(sweepInterval(1_000)).toBe(1_000);
    expect(sweepInterval(0)).toBe(3_600_000);
  });
});
