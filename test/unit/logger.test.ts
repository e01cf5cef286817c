// The job's logger made when first written to (lazyChild), and the UTC day named once a day
// (utcDay): two per-plate savings that must not change what is written.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, lazyChild } from '../../src/logger.js';
import { utcDay, utcMonth } from '../../src/queue/costs.js';

function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  // pino writes synchronously to a plain stream.
  return { logger: createLogger({ level }, stream), lines };
}

describe('lazyChild', () => {
  it('writes the bindings with each line, as child() does, made once', () => {
    const { logger, lines } = capture('info');
    let made = 0;
    const log = lazyChild(logger, () => {
      made++;
      return { account: 'a', jobId: 'j1' };
    });
    log.info({ plate: 'ABC1D23' }, 'one');
    log.warn('two');
    expect(made).toBe(1);
    expect(lines.map((l) => [l.msg, l.account, l.jobId])).toEqual([
      ['one', 'a', 'j1'],
      ['two', 'a', 'j1'],
    ]);
    expect(lines[0]!.plate).toBe('ABC1D23');
  });

  it('a level the parent does not write makes no child and writes nothing', () => {
    const { logger, lines } = capture('info');
    let made = 0;
    const log = lazyChild(logger, () => {
      made++;
      return { account: 'a' };
    });
    log.debug({ x: 1 }, 'not written');
    log.trace('nor this');
    expect(made).toBe(0);
    expect(lines).toEqual([]);
    expect(log.isLevelEnabled('debug')).toBe(false);
  });

  it("a level set on it is the child's, not the parent's", () => {
    const { logger, lines } = capture('info');
    const log = lazyChild(logger, () => ({ account: 'a' }));
    log.level = 'debug';
    log.debug('written');
    logger.debug('not written');
    expect(lines.map((l) => l.msg)).toEqual(['written']);
    expect(logger.level).toBe('info');
  });

  it('still redacts what the parent redacts, and its own children carry both bindings', () => {
    const { logger, lines } = capture('info');
    const log = lazyChild(logger, () => ({ account: 'a' }));
    log.child({ step: 'poll' }).error({ apiKey: 'secret-key-123' }, 'failed');
    expect(lines[0]).toMatchObject({ account: 'a', step: 'poll', apiKey: '[redacted]', msg: 'failed' });
    expect(JSON.stringify(lines)).not.toContain('secret-key-123');
  });
});

describe('utcDay', () => {
  it('names every moment of a UTC day the same, across midnight and back', () => {
    const midnight = Date.UTC(2026, 10, 30);
    expect(utcDay(midnight - 1)).toBe('20261129');
    expect(utcDay(midnight)).toBe('20261130');
    expect(utcDay(midnight + 86_399_999)).toBe('20261130');
    expect(utcDay(midnight + 86_400_000)).toBe('20261201');
    // Back to an earlier day after a later one (a test's clock, a stored time): not the cached name.
    expect(utcDay(midnight - 1)).toBe('20261129');
    expect(utcMonth(midnight + 86_400_000)).toBe('202612');
    expect(utcDay(0)).toBe('19700101');
    expect(utcDay(-1)).toBe('19691231');
  });
});
