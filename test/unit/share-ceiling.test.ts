// The cold gate's share ceiling (bench/cold.ts shareCeiling): the most of its limit a key can use
// over a window from the enqueue, given its first contact and the pace's allowance. It is the
// pace's own arithmetic (accounts/account.ts pacingIntervalMs), so a change there shows here.
import { describe, expect, it } from 'vitest';
import { shareCeiling } from '../../bench/cold.js';
import { pacingIntervalMs } from '../../src/accounts/account.js';

describe('shareCeiling', () => {
  it('with no first contact, is the share the pace spaces requests at: the window over the window plus the allowance', () => {
    const interval = pacingIntervalMs({ rateLimit: { max: 20, durationMs: 1_000, text: '20/s' } }, 25);
    expect(shareCeiling('20/s', 120, 0, 0)).toBe(Math.round((1_000 / interval / 20) * 1_000) / 1_000);
    expect(shareCeiling('20/s', 120, 0, 0)).toBe(0.976);
    expect(shareCeiling('10/s', 80, 0, 0)).toBe(0.976);
  });

  it("loses first contact's time, less the requests it made", () => {
    // 80 s at 20/s: 2.5 s of first contact with 4 requests leaves (4 + 77.5 × 20 × 1000/1025) / 1600.
    expect(shareCeiling('20/s', 80, 2_500, 4)).toBe(0.948);
    expect(shareCeiling('20/s', 120, 2_500, 4)).toBe(0.957);
    // A contact that lasts the whole window leaves only its own requests.
    expect(shareCeiling('20/s', 80, 80_000, 4)).toBe(0.003);
  });

  it('refuses what is not a rate', () => {
    expect(() => shareCeiling('fast', 80, 0, 0)).toThrow(/not a rate/);
  });
});
