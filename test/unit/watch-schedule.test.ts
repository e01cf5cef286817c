// A watch's timing and its comparison, as pure functions: intervals, cron lines, daily windows
// (crossing midnight), and results flattened and compared field by field.
import { describe, expect, it } from 'vitest';
import { isVqbError } from '../../src/errors.js';
import { compare, flatten } from '../../src/watch/diff.js';
import {
  checkCron,
  nextOpening,
  parseEvery,
  parseWindow,
  windowOnClock,
  windowOpen,
} from '../../src/watch/schedule.js';

const code = (fn: () => unknown) => {
  try {
    fn();
    return 'none';
  } catch (err) {
    return isVqbError(err) ? err.code : String(err);
  }
};
const utc = (hhmm: string) => Date.parse(`2026-11-27T${hhmm}:00Z`);

describe('watch schedules', () => {
  it('reads intervals, refusing nonsense and what is under the minimum', () => {
    expect(parseEvery('7d', 60_000)).toBe(7 * 86_400_000);
    expect(parseEvery('90s', 60_000)).toBe(90_000);
    expect(code(() => parseEvery('7x', 60_000))).toBe('WATCH_BAD_SCHEDULE');
    expect(code(() => parseEvery('0', 60_000))).toBe('WATCH_BAD_SCHEDULE');
    expect(code(() => parseEvery('30s', 60_000))).toBe('WATCH_BAD_SCHEDULE');
  });

  it('reads cron lines as BullMQ will, refusing bad ones and ones firing too often', () => {
    expect(checkCron(' 0  3 * * 1 ', 60_000, utc('12:00'))).toBe('0 3 * * 1');
    expect(code(() => checkCron('61 * * * *', 60_000, utc('12:00')))).toBe('WATCH_BAD_SCHEDULE');
    expect(code(() => checkCron('* * *', 60_000, utc('12:00')))).toBe('WATCH_BAD_SCHEDULE');
    expect(code(() => checkCron('*/10 * * * * *', 60_000, utc('12:00')))).toBe('WATCH_BAD_SCHEDULE');
  });

  it('windows: open inside, across midnight too; the next opening when closed', () => {
    const nights = parseWindow('22:00-06:00');
    expect(windowOpen(nights, utc('23:30'))).toBe(true);
    expect(windowOpen(nights, utc('05:59'))).toBe(true);
    expect(windowOpen(nights, utc('06:00'))).toBe(false);
    expect(nextOpening(nights, utc('12:00'))).toBe(utc('22:00'));
    expect(nextOpening(nights, utc('23:00'))).toBe(utc('23:00'));
    const mornings = parseWindow('08:00-09:30');
    expect(nextOpening(mornings, utc('10:00'))).toBe(utc('08:00') + 86_400_000);
    for (const bad of ['22-06', '25:00-06:00', '10:00-10:00', '10:00-11:00-12:00'])
      expect(
        code(() => parseWindow(bad)),
        bad,
      ).toBe('WATCH_BAD_SCHEDULE');
  });

  it('a window (UTC) as a person reads it on the clock of VQ_TIME_ZONE, summer time included', () => {
    const nights = parseWindow('22:00-06:00');
    expect(windowOnClock(nights, 'America/Sao_Paulo', utc('12:00'))).toBe('19:00-03:00');
    // New York: UTC-5 in November, UTC-4 in July.
    expect(windowOnClock(nights, 'America/New_York', utc('12:00'))).toBe('17:00-01:00');
    expect(windowOnClock(nights, 'America/New_York', Date.parse('2027-07-01T12:00:00Z'))).toBe('18:00-02:00');
    expect(windowOnClock(parseWindow('08:00-09:30'), 'Asia/Kolkata', utc('12:00'))).toBe('13:30-15:00');
  });
});

describe('watch comparisons', () => {
  it('flattens objects to paths, a list to one field, leaving ignored names and paths out', () => {
    const result = {
      queryId: 'q1',
      status: 'COMPLETED',
      completedAt: 'x',
      result: { owner: { name: 'ANA' }, restrictions: ['A'], color: 'PRATA', year: 2020 },
    };
    expect(flatten(result, new Set(['queryId', 'completedAt', 'result.color']))).toEqual({
      status: 'COMPLETED',
      'result.owner.name': 'ANA',
      'result.restrictions': '["A"]',
      'result.year': '2020',
    });
  });

  it('reports each field that changed, appeared or went; nothing when equal', () => {
    const before = { a: '1', b: '2', c: '3' };
    expect(compare(before, { ...before })).toEqual([]);
    expect(compare(before, { a: '1', b: '9', d: '4' })).toEqual([
      { field: 'b', before: '2', after: '9' },
      { field: 'c', before: '3', after: '' },
      { field: 'd', before: '', after: '4' },
    ]);
  });
});
