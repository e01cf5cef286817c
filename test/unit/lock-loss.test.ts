// BullMQ says in three ways that this worker no longer holds a job's lock; each is a lock loss
// (one warning, a metric), never a "redis client error".

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { noMetrics } from '../../src/metrics.js';
import { LockLoss, lockErrorJob } from '../../workers/lock-loss.js';

describe('lockErrorJob', () => {
  it('names the job in each of BullMQ lock-loss messages', () => {
    expect(lockErrorJob(new Error('could not renew lock for job b.ABC1234'))).toBe('b.ABC1234');
    expect(lockErrorJob(new Error('Missing lock for job b.ABC1234. moveToFinished'))).toBe('b.ABC1234');
    expect(lockErrorJob(new Error('Lock mismatch for job f.AAA0089. Cmd moveToFinished from active'))).toBe(
      'f.AAA0089',
    );
  });

  it('is undefined for anything else', () => {
    expect(lockErrorJob(new Error('Missing key for job b.ABC1234. moveToFinished'))).toBeUndefined();
    expect(lockErrorJob(new Error('connect ECONNREFUSED 127.0.0.1:6379'))).toBeUndefined();
    expect(lockErrorJob(undefined)).toBeUndefined();
  });
});

describe('LockLoss', () => {
  it("says a job's failed lock renewal once (BullMQ repeats it every renewal), again after ten minutes; other losses each time", () => {
    const lines: { jobId?: string; when?: string }[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const counted: string[] = [];
    let now = 1_000_000;
    const loss = new LockLoss(
      log,
      { ...noMetrics, lockLost: (_account: string, when: string) => void counted.push(when) },
      () => now,
    );
    for (let i = 0; i < 12; i++) {
      loss.report('seguros', 'b.AAA0001', 'renewal-failed');
      now += 500;
    }
    loss.report('seguros', 'b.AAA0002', 'renewal-failed');
    loss.report('frota', 'b.AAA0001', 'renewal-failed');
    loss.report('seguros', 'b.AAA0001', 'nothing-sent');
    loss.report('seguros', 'b.AAA0001', 'nothing-sent');
    expect(lines.map((l) => `${l.jobId} ${l.when}`)).toEqual([
      'b.AAA0001 renewal-failed',
      'b.AAA0002 renewal-failed',
      'b.AAA0001 renewal-failed',
      'b.AAA0001 nothing-sent',
      'b.AAA0001 nothing-sent',
    ]);
    expect(counted).toHaveLength(5);
    now += 10 * 60_000;
    loss.report('seguros', 'b.AAA0001', 'renewal-failed');
    expect(lines).toHaveLength(6);
  });
});
