// Pure timing: every function gets a fixed `now`, so no clock and no fake timers are needed.
import { describe, expect, it } from 'vitest';
import { parseRateLimit } from '../../src/setting-values.js';
import {
  backoffDelay,
  parseRateLimitHeaders,
  parseResetHeader,
  parseRetryAfter,
  retryAfterFrom429,
} from '../../src/upstream/timing.js';

const NOW = Date.UTC(2030, 0, 1, 12, 0, 0); // 2030-01-01T12:00:00Z, a whole second
const NOW_S = NOW / 1000;

describe('parseRetryAfter', () => {
  it('reads delta-seconds as milliseconds', () => {
    expect(parseRetryAfter('60', NOW)).toBe(60_000);
    expect(parseRetryAfter('0', NOW)).toBe(0);
    expect(parseRetryAfter(' 7 ', NOW)).toBe(7_000);
    expect(parseRetryAfter('1.5', NOW)).toBe(1_500);
  });

  it('reads an HTTP-date as the time left until it, never negative', () => {
    expect(parseRetryAfter('Tue, 01 Jan 2030 12:00:30 GMT', NOW)).toBe(30_000);
    expect(parseRetryAfter('Tue, 01 Jan 2030 12:02:00 GMT', NOW)).toBe(120_000);
    expect(parseRetryAfter('Tue, 01 Jan 2030 11:59:00 GMT', NOW)).toBe(0);
  });

  it('gives undefined for absent, negative or unreadable values', () => {
    expect(parseRetryAfter(undefined, NOW)).toBeUndefined();
    expect(parseRetryAfter('-5', NOW)).toBeUndefined();
    expect(parseRetryAfter('soon', NOW)).toBeUndefined();
    expect(parseRetryAfter('', NOW)).toBeUndefined();
  });
});

describe('X-RateLimit-Reset', () => {
  it('reads Unix seconds as an epoch-ms reset time', () => {
    expect(parseResetHeader(String(NOW_S + 45), NOW)).toBe(NOW + 45_000);
    expect(parseResetHeader(String(NOW_S), NOW)).toBe(NOW);
  });

  it('reads a small number as seconds from now', () => {
    expect(parseResetHeader('30', NOW)).toBe(NOW + 30_000);
  });

  it('ignores absent, negative and non-numeric values', () => {
    expect(parseResetHeader(undefined, NOW)).toBeUndefined();
    expect(parseResetHeader('-1', NOW)).toBeUndefined();
    expect(parseResetHeader('tomorrow', NOW)).toBeUndefined();
  });

  it('parseRateLimitHeaders collects limit, remaining and reset, skipping the bad ones', () => {
    expect(
      parseRateLimitHeaders(
        { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(NOW_S + 10) },
        NOW,
      ),
    ).toEqual({
      limit: 60,
      remaining: 0,
      resetAt: NOW + 10_000,
    });
    expect(parseRateLimitHeaders({ 'x-ratelimit-limit': ['300', '60'], 'x-ratelimit-remaining': 'lots' }, NOW)).toEqual(
      { limit: 300 },
    );
    expect(parseRateLimitHeaders({}, NOW)).toEqual({});
  });
});

describe('retryAfterFrom429', () => {
  const reset = String(NOW_S + 50); // 50 s
  const allHints = { 'retry-after': '20', 'x-ratelimit-reset': reset };
  const body = (error: Record<string, unknown>) => ({
    statusCode: 429,
    error: { code: 'RATE_LIMIT_EXCEEDED', message: 'slow down', ...error },
  });

  it('prefers the body retryAfterMs over everything else', () => {
    expect(retryAfterFrom429(allHints, body({ retryAfterMs: 1_234, retryAfter: 30 }), NOW)).toBe(1_234);
  });

  it('then Retry-After (seconds or date)', () => {
    expect(retryAfterFrom429(allHints, body({ retryAfter: 30 }), NOW)).toBe(20_000);
    expect(
      retryAfterFrom429(
        { 'retry-after': 'Tue, 01 Jan 2030 12:00:05 GMT', 'x-ratelimit-reset': reset },
        body({ retryAfter: 30 }),
        NOW,
      ),
    ).toBe(5_000);
    expect(retryAfterFrom429({ 'retry-after': ['3', '9'] }, undefined, NOW)).toBe(3_000);
  });

  it('then the body retryAfter in seconds', () => {
    expect(retryAfterFrom429({ 'x-ratelimit-reset': reset }, body({ retryAfter: 30 }), NOW)).toBe(30_000);
    // An unreadable Retry-After falls through to the next hint.
    expect(retryAfterFrom429({ 'retry-after': 'later' }, body({ retryAfter: 30 }), NOW)).toBe(30_000);
  });

  it('then the X-RateLimit-Reset time', () => {
    expect(retryAfterFrom429({ 'x-ratelimit-reset': reset }, body({}), NOW)).toBe(50_000);
    expect(retryAfterFrom429({ 'x-ratelimit-reset': String(NOW_S - 5) }, body({}), NOW)).toBe(0);
  });

  it('is undefined without any hint, and ignores negative or non-numeric body hints', () => {
    expect(retryAfterFrom429({}, body({}), NOW)).toBeUndefined();
    expect(retryAfterFrom429({}, undefined, NOW)).toBeUndefined();
    expect(retryAfterFrom429({}, 'not an object', NOW)).toBeUndefined();
    expect(retryAfterFrom429({}, body({ retryAfterMs: -1, retryAfter: '60' }), NOW)).toBeUndefined();
  });
});

describe('backoffDelay', () => {
  it('spreads base·2^attempt over [½, 1]×', () => {
    expect(backoffDelay(0, 1_000, 60_000, () => 0)).toBe(500);
    expect(backoffDelay(0, 1_000, 60_000, () => 1)).toBe(1_000);
    expect(backoffDelay(3, 1_000, 60_000, () => 0)).toBe(4_000);
    expect(backoffDelay(3, 1_000, 60_000, () => 1)).toBe(8_000);
    expect(backoffDelay(3, 1_000, 60_000, () => 0.5)).toBe(6_000);
  });

  it('never exceeds the cap, however many attempts', () => {
    expect(backoffDelay(10, 1_000, 30_000, () => 1)).toBe(30_000);
    expect(backoffDelay(10, 1_000, 30_000, () => 0)).toBe(15_000);
    expect(backoffDelay(1_000, 1_000, 30_000, () => 1)).toBe(30_000);
  });

  it('treats a negative attempt as the first', () => {
    expect(backoffDelay(-3, 1_000, 60_000, () => 1)).toBe(1_000);
  });

  it('stays within bounds with the default random', () => {
    for (let attempt = 0; attempt < 12; attempt += 1) {
      const exp = Math.min(20_000, 250 * 2 ** attempt);
      const d = backoffDelay(attempt, 250, 20_000);
      expect(d).toBeGreaterThanOrEqual(exp / 2);
      expect(d).toBeLessThanOrEqual(exp);
    }
  });
});

describe('what the upstream says of its limit', () => {
  const now = Date.UTC(2026, 10, 24, 12, 0, 0);
  it('reads the IETF draft fields before X-RateLimit-*: the first policy, its window, remaining and reset', () => {
    expect(
      parseRateLimitHeaders(
        { 'ratelimit-policy': '"default";q=300;w=60, "daily";q=10000;w=86400', ratelimit: '"default";r=12;t=30' },
        now,
      ),
    ).toEqual({
      limit: 300,
      windowMs: 60_000,
      remaining: 12,
      resetAt: now + 30_000,
    });
    expect(
      parseRateLimitHeaders(
        {
          'ratelimit-policy': '20;w=1',
          'ratelimit-limit': '20',
          'ratelimit-remaining': '3',
          'ratelimit-reset': '1',
          'x-ratelimit-limit': '99',
        },
        now,
      ),
    ).toEqual({
      limit: 20,
      windowMs: 1_000,
      remaining: 3,
      resetAt: now + 1_000,
    });
    expect(
      parseRateLimitHeaders(
        { 'x-ratelimit-limit': '300', 'x-ratelimit-remaining': '5', 'x-ratelimit-reset': String(now / 1000 + 40) },
        now,
      ),
    ).toEqual({
      limit: 300,
      remaining: 5,
      resetAt: now + 40_000,
    });
  });

  it('parses `auto` with a ceiling and a start; a fixed rate stays exact', () => {
    expect(parseRateLimit('auto')).toEqual({ max: 1, durationMs: 1_000, text: 'auto', auto: {} });
    expect(parseRateLimit('auto<=300/min')).toEqual({
      max: 1,
      durationMs: 1_000,
      text: 'auto<=300/min',
      auto: { ceilingPerSecond: 5 },
    });
    expect(parseRateLimit('auto<=20/s,start=5/s')).toMatchObject({
      max: 5,
      durationMs: 1_000,
      auto: { ceilingPerSecond: 20 },
    });
    expect(parseRateLimit('auto<=30/min')).toMatchObject({
      max: 30,
      durationMs: 60_000,
      auto: { ceilingPerSecond: 0.5 },
    });
    expect(parseRateLimit('auto<=fast')).toBeUndefined();
    expect(parseRateLimit('60/min')).toEqual({ max: 60, durationMs: 60_000, text: '60/min' });
  });
});
