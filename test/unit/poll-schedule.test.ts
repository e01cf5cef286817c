import { describe, expect, it } from 'vitest';
import { firstPollBounds, isRelevant, learnStep, nextPollDelay, RELEVANCE } from '../../workers/poll-schedule.js';
import { actionFor } from '../../workers/actions.js';
import { BadResponseError, ExpiredKeyError, InvalidKeyError, PermanentError, PermissionError, RateLimitedError, TransientError } from '../../src/upstream/errors.js';
import { limiterFor } from '../../workers/worker.js';
import { loadConfig } from '../../src/config.js';

const poll = { initialMs: 1000, intervalMs: 500, maxIntervalMs: 4000, deadlineMs: 60_000, adaptive: true, quantile: 0.9 };

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
});

describe('failure → queue action table', () => {
  it.each([
    [new InvalidKeyError('x'), 'pause-line'],
    [new ExpiredKeyError('x'), 'pause-line'],
    [new PermissionError('create', 'x'), 'pause-line'],
    [new RateLimitedError('x', 1000), 'wait'],
    [new TransientError('HTTP_503', 503, 'x'), 'retry'],
    [new BadResponseError('get', 200, 'x'), 'retry'],
    [new BadResponseError('create', 201, 'x'), 'fail'],
    [new PermanentError(400, 'x', 'INVALID_PLATE'), 'fail'],
  ] as const)('%s → %s', (error, action) => {
    expect(actionFor(error)).toBe(action);
  });
});

describe('pacing', () => {
  it('smooth mode spaces starts evenly with a margin; window mode is BullMQ as is', () => {
    expect(limiterFor(loadConfig({ VQ_RATE_LIMIT: '60/min' }))).toEqual({ max: 1, duration: 1020 });
    expect(limiterFor(loadConfig({ VQ_RATE_LIMIT: '20/s', VQ_PACING_MARGIN: '0' }))).toEqual({ max: 1, duration: 50 });
    expect(limiterFor(loadConfig({ VQ_RATE_LIMIT: '300/min', VQ_PACING: 'window' }))).toEqual({ max: 300, duration: 60_000 });
  });
});
