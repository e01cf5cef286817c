// Reading a deadline as people and clients write it, and the judgement's words (plans/deadline.ts).
import { describe, expect, it } from 'vitest';
import { deadlineLine, etaRange, judgeDeadline, parseDeadline, parseSpan } from '../../src/plans/deadline.js';

const NOW = new Date(2026, 10, 27, 15, 30, 0).getTime(); // local 15:30

describe('parseDeadline', () => {
  it('reads spans with their unit, times of day (today, or tomorrow once passed) and ISO instants', () => {
    expect(parseSpan('1h30m')).toBe(90 * 60_000);
    expect(parseSpan('90')).toBeUndefined();
    expect(parseDeadline({ within: '2h' }, NOW)).toBe(NOW + 2 * 3_600_000);
    expect(parseDeadline({ by: '18:00' }, NOW)).toBe(new Date(2026, 10, 27, 18, 0).getTime());
    expect(parseDeadline({ by: '09:00' }, NOW)).toBe(new Date(2026, 10, 28, 9, 0).getTime());
    expect(parseDeadline({ deadline: '2026-11-28T12:00:00Z' }, NOW)).toBe(Date.parse('2026-11-28T12:00:00Z'));
    expect(parseDeadline({ deadline: '45m' }, NOW)).toBe(NOW + 45 * 60_000);
    expect(parseDeadline({}, NOW)).toBeUndefined();
  });

  it.each([
    [{ by: '25:00' }],
    [{ by: 'tomorrow' }],
    [{ within: '90' }],
    [{ within: '0m' }],
    [{ deadline: '2020-01-01T00:00:00Z' }],
    [{ by: '18:00', within: '2h' }],
  ])('refuses %j with BAD_DEADLINE', (given) => {
    expect(() => parseDeadline(given, NOW)).toThrow(expect.objectContaining({ code: 'BAD_DEADLINE' }));
  });
});

describe('judgeDeadline', () => {
  const figures = {
    perSecond: 20,
    rateSource: 'configured' as const,
    requestsPerPlate: 2,
    answerMs: 1_000,
    aheadPlates: 0,
  };

  it('gives a range that widens with a learned rate, and counts the work ahead', () => {
    const known = etaRange({ ...figures, plates: 1_000 })!;
    const learned = etaRange({ ...figures, rateSource: 'learned', plates: 1_000 })!;
    expect(known.lowMs).toBeLessThan(known.expectedMs);
    expect(known.expectedMs).toBeLessThan(known.highMs);
    expect(learned.highMs - learned.lowMs).toBeGreaterThan(known.highMs - known.lowMs);
    expect(etaRange({ ...figures, plates: 1_000, aheadPlates: 1_000 })!.expectedMs).toBeGreaterThan(
      known.expectedMs * 1.9,
    );
    expect(etaRange({ ...figures, rateSource: 'start', plates: 10 })).toBeUndefined();
  });

  it('is feasible only when the slow end is in time, and says so on one line', () => {
    const plates = 200; // 400 requests at 20/s: 20 s, and the answer
    expect(judgeDeadline(NOW + 60_000, { ...figures, plates }, NOW).feasibility).toBe('feasible');
    const tight = judgeDeadline(NOW + 22_000, { ...figures, plates }, NOW);
    expect(tight.feasibility).toBe('not feasible');
    expect(deadlineLine(tight, NOW)).toMatch(/^deadline: not feasible — due .+; finishes in \d+ s–\d+ s/);
    const unknown = judgeDeadline(NOW + 60_000, { ...figures, rateSource: 'start', plates }, NOW);
    expect(deadlineLine(unknown, NOW)).toMatch(/^deadline: unknown — .+vqb check/);
  });
});
