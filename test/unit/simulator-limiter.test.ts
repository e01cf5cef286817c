import { describe, expect, it } from 'vitest';
import { createLimiter, type Limiter, retryAfterSeconds } from '../../src/simulator/limiter.js';
import { DAY_MS, QuotaCounter, quotaWindow } from '../../src/simulator/quota.js';
import { seededRandom } from '../../src/simulator/vehicle.js';

/** Offers a request at each time; returns the accepted times. */
function drive(
  limiter: Limiter,
  times: number[],
): { accepted: number[]; rejected: Array<{ t: number; retryAfterMs: number }> } {
  const accepted: number[] = [];
  const rejected: Array<{ t: number; retryAfterMs: number }> = [];
  for (const t of times) {
    const state = limiter.peek(t);
    if (state.retryAfterMs === 0) {
      limiter.take(t);
      accepted.push(t);
    } else {
      rejected.push({ t, retryAfterMs: state.retryAfterMs });
    }
  }
  return { accepted, rejected };
}

function countIn(times: number[], from: number, to: number): number {
  return times.filter((t) => t > from && t <= to).length;
}

describe('fixed window', () => {
  it('resets at boundaries aligned to the duration, letting 2×max through across one', () => {
    const limiter = createLimiter('fixed', { max: 5, durationMs: 1000 });
    const { accepted, rejected } = drive(limiter, [990, 991, 992, 993, 994, 995, 1000, 1001, 1002, 1003, 1004, 1005]);
    expect(accepted).toEqual([990, 991, 992, 993, 994, 1000, 1001, 1002, 1003, 1004]);
    expect(rejected).toEqual([
      { t: 995, retryAfterMs: 5 },
      { t: 1005, retryAfterMs: 995 },
    ]);
    expect(limiter.peek(1500)).toMatchObject({ remaining: 0, resetAtMs: 2000 });
  });
});

describe('sliding window', () => {
  it('never admits more than max in any interval of the duration, and rejects only when full', () => {
    const limiter = createLimiter('sliding', { max: 5, durationMs: 1000 });
    const random = seededRandom(42);
    const times: number[] = [];
    let t = 0;
    for (let i = 0; i < 600; i += 1) times.push((t += Math.floor(random() * 80)));
    const { accepted, rejected } = drive(limiter, times);
    for (const a of accepted) expect(countIn(accepted, a - 1000, a)).toBeLessThanOrEqual(5);
    for (const r of rejected) {
      expect(countIn(accepted, r.t - 1000, r.t)).toBe(5);
      // The wait is exact: the oldest accepted request in the window leaves at +1000.
      const oldest = accepted.filter((a) => a > r.t - 1000 && a <= r.t)[0]!;
      expect(r.retryAfterMs).toBe(oldest + 1000 - r.t);
    }
    expect(accepted.length).toBeGreaterThan(100);
  });

  it('reports the time the oldest slot frees as reset', () => {
    const limiter = createLimiter('sliding', { max: 2, durationMs: 1000 });
    expect(limiter.peek(0)).toEqual({ remaining: 2, resetAtMs: 0, retryAfterMs: 0 });
    limiter.take(100);
    expect(limiter.take(300)).toEqual({ remaining: 0, resetAtMs: 1100, retryAfterMs: 800 });
    expect(limiter.peek(1100)).toEqual({ remaining: 1, resetAtMs: 1300, retryAfterMs: 0 });
  });
});

describe('token bucket', () => {
  it('allows a burst of max, then one request per duration/max', () => {
    const limiter = createLimiter('token-bucket', { max: 5, durationMs: 1000 });
    const burst = drive(limiter, [0, 0, 0, 0, 0, 0]);
    expect(burst.accepted).toHaveLength(5);
    expect(burst.rejected).toEqual([{ t: 0, retryAfterMs: 200 }]);
    // Two offers every 100 ms for 2 s: exactly one token arrives per 200 ms.
    const times: number[] = [];
    for (let t = 100; t <= 2000; t += 100) times.push(t, t);
    const steady = drive(limiter, times);
    expect(steady.accepted).toEqual([200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800, 2000]);
    expect(limiter.peek(2050)).toMatchObject({ remaining: 0, resetAtMs: 2200, retryAfterMs: 150 });
  });

  it('refills up to capacity only', () => {
    const limiter = createLimiter('token-bucket', { max: 3, durationMs: 300 });
    limiter.take(0);
    expect(limiter.peek(10_000)).toEqual({ remaining: 3, resetAtMs: 10_000, retryAfterMs: 0 });
  });
});

describe('retryAfterSeconds', () => {
  it('rounds up to whole seconds, at least 1', () => {
    expect(retryAfterSeconds(1)).toBe(1);
    expect(retryAfterSeconds(0)).toBe(1);
    expect(retryAfterSeconds(1000)).toBe(1);
    expect(retryAfterSeconds(1001)).toBe(2);
    expect(retryAfterSeconds(59_400)).toBe(60);
  });
});

describe('daily quota', () => {
  it('uses UTC days by default', () => {
    const t = Date.UTC(2030, 4, 6, 23, 59, 59, 500);
    expect(quotaWindow(t, { windowMs: null, originMs: 0 })).toEqual({
      startMs: Date.UTC(2030, 4, 6),
      endMs: Date.UTC(2030, 4, 7),
    });
    expect(Date.UTC(2030, 4, 7) - Date.UTC(2030, 4, 6)).toBe(DAY_MS);
  });

  it('uses fixed windows from the origin when scaled down, and restarts the count each window', () => {
    const spec = { windowMs: 1000, originMs: 5_250 };
    expect(quotaWindow(7_000, spec)).toEqual({ startMs: 6_250, endMs: 7_250 });
    const quota = new QuotaCounter();
    expect(quota.take(5_300, 2, spec).remaining).toBe(1);
    expect(quota.take(5_400, 2, spec)).toEqual({ used: 2, remaining: 0, resetAtMs: 6_250, retryAfterMs: 850 });
    expect(quota.peek(6_249, 2, spec).retryAfterMs).toBe(1);
    expect(quota.peek(6_250, 2, spec)).toEqual({ used: 0, remaining: 2, resetAtMs: 7_250, retryAfterMs: 0 });
  });
});
