// The cold gate's share ceiling (bench/cold.ts shareCeiling): the most of its limit a key can use
// over a window from the enqueue, given its first contact and the pace's allowance. It spaces
// requests with the pace's own pacingIntervalMs, so a change to the allowance rule shows here as a
// figure that moved.
import { describe, expect, it } from 'vitest';
import { shareCeiling } from '../../bench/cold.js';

describe('shareCeiling', () => {
  it('with no first contact, is the share the pace spaces requests at: the window over the window plus the allowance', () => {
    // 1,000 / 1,025: 20 requests span the second plus the default 25 ms allowance.
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
