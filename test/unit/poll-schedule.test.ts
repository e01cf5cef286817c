import { describe, expect, it } from 'vitest';
import { jitterAllowanceMs, pacingIntervalMs } from '../../src/accounts/account.js';
import { loadConfig } from '../../src/config.js';
import {
  firstContactPollDelay,
  firstPollBounds,
  isRelevant,
  learnStep,
  nextPollDelay,
  pendingPollDelay,
  RELEVANCE,
  seedMs,
} from '../../src/queue/poll-schedule.js';
import {
  BadResponseError,
  ExpiredKeyError,
  InvalidKeyError,
  PermanentError,
  PermissionError,
  RateLimitedError,
  TransientError,
} from '../../src/upstream/errors.js';
import { decide, decideJobFailure, STALLED_REASON, wasSent } from '../../workers/actions.js';

const poll = {
  initialMs: 1000,
  intervalMs: 500,
  maxIntervalMs: 4000,
  deadlineMs: 60_000,
  adaptive: true,
  quantile: 0.9,
  interactiveMs: 1000,
};

describe('poll schedule', () => {
  it('settles where a share q of first polls find the query finished', () => {
    // Simulate the learner on a known distribution: completion uniform in [2, 6] s.
    let logOffset = 0;
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 20_000; i++) {
      const estimate = poll.initialMs * Math.exp(logOffset);
      const completion = 2000 + 4000 * random();
      logOffset += learnStep(completion > estimate, poll.quantile);
    }
    const learned = poll.initialMs * Math.exp(logOffset);
    // The 0.9 quantile of U[2, 6] s is 5.6 s.
    expect(learned).toBeGreaterThan(5_000);
    expect(learned).toBeLessThan(6_100);
  });

  it('ignores samples taken far from the current estimate (stale samples cannot overshoot)', () => {
    expect(isRelevant(true, 500, 1000)).toBe(false); // pending at 0.5 s says nothing about 1 s
    expect(isRelevant(true, 1000 * Math.exp(-RELEVANCE) + 1, 1000)).toBe(true);
    expect(isRelevant(false, 3000, 1000)).toBe(false); // finished by 3 s says nothing about 1 s
    expect(isRelevant(false, 900, 1000)).toBe(true);
  });

  it('backs off between later polls up to the cap, and bounds the first poll', () => {
    const mid = () => 0.5;
    expect(nextPollDelay(1, poll, mid)).toBe(375);
    expect(nextPollDelay(2, poll, mid)).toBe(750);
    expect(nextPollDelay(10, poll, () => 1)).toBe(4000);
    expect(firstPollBounds(poll)).toEqual({ minMs: 50, maxMs: 30_000 });
  });

  it('polls a query pending at its first poll again at the 90 % point of the stated answers that took longer', () => {
    // Answers of 1-3 s (every 10 ms), a first poll at 2.8 s found it pending: of those longer, the
    // 90 % point is 2.98 s, and 100 ms on for the create's round trip.
    const stated = Array.from({ length: 201 }, (_, i) => 1_000 + i * 10);
    expect(pendingPollDelay(stated, 2_800, 0.9)).toBe(280);
    // Pending longer than any answer kept: once more after a tenth of its age (at least 100 ms),
    // then the usual backoff; with nothing kept, nothing to go on.
    expect(pendingPollDelay(stated, 3_000, 0.9)).toBe(300);
    expect(pendingPollDelay([400], 600, 0.9)).toBe(100);
    expect(pendingPollDelay([], 100, 0.9)).toBeUndefined();
    // One kept answer longer, or a few: the point past the time elapsed, 100 ms on.
    expect(pendingPollDelay([2_000], 1_999, 0.9)).toBe(101);
    expect(pendingPollDelay([2_000], 1_990, 0.9)).toBe(110);
    expect(pendingPollDelay([1_500, 1_000, 2_000], 1_995, 0.9)).toBe(105);
  });
});

describe('failure → queue action table', () => {
  it.each([
    [new InvalidKeyError('x'), 'pause-account'],
    [new ExpiredKeyError('x'), 'pause-account'],
    [new PermissionError('create', 'x'), 'pause-account'],
    [new RateLimitedError('x', 1000), 'wait'],
    [new TransientError('HTTP_503', 503, 'x'), 'retry'],
    [new BadResponseError('get', 200, 'x'), 'retry'],
    [new BadResponseError('create', 201, 'x'), 'fail'],
    [new PermanentError(400, 'x', 'INVALID_PLATE'), 'fail'],
  ] as const)('%s → %s', (error, action) => {
    expect(decide(error).action).toBe(action);
  });
});

describe('pacing', () => {
  it('N requests span the window plus the jitter allowance: VQ_PACING_JITTER, or 0.5 % of a longer window', () => {
    const interval = (rate: string, jitter = '25ms') => {
      const config = loadConfig({ VQ_RATE_LIMIT: rate, VQ_PACING_JITTER: jitter });
      return pacingIntervalMs(config.accounts[0]!, config.pacingJitterMs);
    };
    // A per-minute window: 300 ms of room (a late wake-up there costs a slot seconds away).
    expect(interval('60/min')).toBeCloseTo(1005, 2);
    expect(interval('12/min')).toBeCloseTo(5025, 2);
    expect(interval('300/min', '0ms')).toBe(201);
    expect(interval('60/min', '1s')).toBeCloseTo(1016.667, 2);
    // A per-second window: the setting (0.5 % of a second is 5 ms).
    expect(interval('20/s')).toBeCloseTo(51.25, 2);
    expect(interval('20/s', '0ms')).toBeCloseTo(50.25, 2);
    expect(jitterAllowanceMs(1_000, 25)).toBe(25);
    expect(jitterAllowanceMs(60_000, 25)).toBe(300);
    // The cost of the margin: 0.5 % at per-minute limits, 2.4 % at 20/s.
    expect(1000 / interval('60/min')).toBeGreaterThan(0.99);
    expect(50 / interval('20/s')).toBeGreaterThan(0.97);
  });
});

describe('failure table', () => {
  it('decides refunds: a create answered or refused before sending is refunded; one that may have been sent is not', () => {
    // Only the upstream's own error envelope proves a 5xx create was not made; a gateway's page
    // or an answer cut off after its status proves nothing (issue 20: re-sent only flagged).
    expect(decide(new TransientError('HTTP_503', 503, 'x', 'SERVICE_UNAVAILABLE')).refundCreate).toBe(true);
    expect(
      decide(new TransientError('HTTP_502', 502, 'the upstream answered 502: <html>Bad Gateway</html>')).refundCreate,
    ).toBe(false);
    expect(
      decide(new TransientError('CONNECTION_RESET', 201, 'create request failed: other side closed')).refundCreate,
    ).toBe(false);
    expect(decide(new TransientError('BODY_TIMEOUT', 201, 'x')).refundCreate).toBe(false);
    expect(decide(new TransientError('CONNECTION_REFUSED', 0, 'x')).refundCreate).toBe(true);
    expect(decide(new TransientError('CONNECTION_RESET', 0, 'x')).refundCreate).toBe(false);
    expect(decide(new TransientError('REQUEST_TIMEOUT', 0, 'x')).refundCreate).toBe(false);
    expect(decide(new BadResponseError('create', 201, 'x')).refundCreate).toBe(false);
    expect(decide(new RateLimitedError('x', 1000)).refundCreate).toBe(true);
  });

  it('retries a poll answered 404 over its backoff (a new query may not be known yet); a create answered 404 fails', () => {
    expect(decide(new PermanentError(404, 'query not found', 'QUERY_NOT_FOUND', 'get')).action).toBe('retry');
    expect(decide(new PermanentError(404, 'product not found', 'PRODUCT_NOT_FOUND', 'create')).action).toBe('fail');
    expect(decide(new PermanentError(400, 'x', 'INVALID_PLATE', 'create')).action).toBe('fail');
  });

  it('counts as sent every request that left, whatever came back', () => {
    expect(wasSent(new TransientError('CONNECTION_REFUSED', 0, 'x'))).toBe(false);
    expect(wasSent(new TransientError('CONNECT_TIMEOUT', 0, 'x'))).toBe(false);
    expect(wasSent(new TransientError('CONNECTION_RESET', 201, 'x'))).toBe(true);
    expect(wasSent(new TransientError('HEADERS_TIMEOUT', 0, 'x'))).toBe(true);
    expect(wasSent(new BadResponseError('create', 200, 'x'))).toBe(true);
  });

  it('tells a used-up quota from the per-window rate by the scope read from the answer', () => {
    expect(decide(new RateLimitedError('x', 1000, 'rate')).waitReason).toBe('rate_limit');
    expect(decide(new RateLimitedError('x', 6 * 3_600_000, 'quota')).waitReason).toBe('quota');
  });

  it("records BullMQ's own failures: stalled too often at once, anything else on the last attempt only", () => {
    expect(decideJobFailure(STALLED_REASON, true)).toBe('JOB_STALLED');
    expect(decideJobFailure('boom', true)).toBeUndefined();
    expect(decideJobFailure('boom', false)).toBe('INTERNAL_ERROR');
  });
});

describe('first contact', () => {
  /** The polls of the plate that meets the upstream, as times after its create, up to `untilMs`. */
  function pollsUntil(untilMs: number): number[] {
    const at = [firstContactPollDelay(0)];
    while (at.at(-1)! < untilMs) at.push(at.at(-1)! + firstContactPollDelay(at.at(-1)!));
    return at;
  }

  it('reads an answer of 1-3 s within 0.6 s of it (the rest of the second is the poll and the next create), and one of 5-15 s in at most 11 polls', () => {
    for (let answer = 100; answer <= 3_000; answer += 50) {
      const read = pollsUntil(answer).at(-1)!;
      expect(read - answer).toBeLessThanOrEqual(600);
    }
    expect(pollsUntil(3_000)).toEqual([250, 500, 750, 1125, 1688, 2288, 2888, 3488]);
    for (const answer of [5_000, 10_000, 15_000]) expect(pollsUntil(answer).length).toBeLessThanOrEqual(11);
  });

  it('starts the estimate at twice the first answer, at the configured start once it is a third of it', () => {
    expect(seedMs(2_000, 15_000)).toBe(4_000);
    expect(seedMs(5_000, 15_000)).toBe(15_000);
    expect(seedMs(7_000, 15_000)).toBe(15_000);
    // A configured start below the answer: never sooner than 1.25 times the answer.
    expect(seedMs(7_000, 5_000)).toBe(8_750);
  });
});
