// Reading a deadline as people and clients write it, and the judgement's words (plans/deadline.ts).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
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

  it("reads a time of day and an ISO instant with no offset on VQ_TIME_ZONE's clock, not the server's", () => {
    const SP = 'America/Sao_Paulo'; // UTC−3, no summer time since 2019
    const morning = Date.parse('2026-11-27T12:00:00Z'); // 09:00 in São Paulo
    expect(parseDeadline({ by: '18:00' }, morning, SP)).toBe(Date.parse('2026-11-27T21:00:00Z'));
    expect(parseDeadline({ by: '18:00' }, morning, 'UTC')).toBe(Date.parse('2026-11-27T18:00:00Z'));
    // 19:00 in São Paulo is 22:00 UTC: 18:00 has passed there, so it is tomorrow's (UTC's 18:00 would be too).
    const evening = Date.parse('2026-11-27T22:00:00Z');
    expect(parseDeadline({ by: '18:00' }, evening, SP)).toBe(Date.parse('2026-11-28T21:00:00Z'));
    // 23:30 in São Paulo is 02:30 UTC of the next day: "08:00" is the same São Paulo day's morning after.
    const late = Date.parse('2026-11-28T02:30:00Z');
    expect(parseDeadline({ by: '08:00' }, late, SP)).toBe(Date.parse('2026-11-28T11:00:00Z'));
    expect(parseDeadline({ deadline: '2026-11-28 08:30' }, morning, SP)).toBe(Date.parse('2026-11-28T11:30:00Z'));
    expect(parseDeadline({ deadline: '2026-11-28T08:30:00Z' }, morning, SP)).toBe(Date.parse('2026-11-28T08:30:00Z'));
    // A zone with summer time: 18:00 in New York is 23:00 UTC in November, 22:00 in July.
    const ny = 'America/New_York';
    expect(parseDeadline({ by: '18:00' }, morning, ny)).toBe(Date.parse('2026-11-27T23:00:00Z'));
    expect(parseDeadline({ deadline: '2027-07-01 18:00' }, morning, ny)).toBe(Date.parse('2027-07-01T22:00:00Z'));
    expect(() => parseDeadline({ deadline: '2027-02-30 10:00' }, morning, SP)).toThrow(
      expect.objectContaining({ code: 'BAD_DEADLINE', message: expect.stringContaining('no such date') }),
    );
    const line = deadlineLine(
      {
        feasibility: 'feasible',
        deadline: Date.parse('2026-11-27T21:00:00Z'),
        aheadPlates: 0,
        slackMs: 0,
        eta: { low: morning, high: morning, expected: morning },
      },
      morning - 60_000,
      SP,
    );
    expect(line).toContain('due 2026-11-27 18:00 America/Sao_Paulo');
  });

  it('VQ_TIME_ZONE: an IANA name, else the ConfigError names it; unset, the process zone', () => {
    expect(loadConfig({ VQ_TIME_ZONE: 'America/Sao_Paulo' }).timeZone).toBe('America/Sao_Paulo');
    expect(() => loadConfig({ VQ_TIME_ZONE: 'Brasilia' })).toThrow(/VQ_TIME_ZONE/);
    expect(loadConfig({}).timeZone).toBe(Intl.DateTimeFormat().resolvedOptions().timeZone);
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
