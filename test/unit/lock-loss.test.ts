// BullMQ says in three ways that this worker no longer holds a job's lock; each is a lock loss
// (one warning, a metric), never a "redis client error".
import { describe, expect, it } from 'vitest';
import { lockErrorJob } from '../../workers/lock-loss.js';

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
