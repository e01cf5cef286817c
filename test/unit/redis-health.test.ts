// How vqb tells a full or a lost Redis from other errors, what it answers for one, and that an
// outage is logged once per change of state, not once per error.
import { describe, expect, it } from 'vitest';
import { isError, RedisFullError, RedisUnreplicatedError } from '../../src/errors.js';
import { describeError } from '../../src/http/errors.js';
import {
  isRedisDown,
  isRedisFull,
  isSlotMigrating,
  MIGRATION_SAID_AFTER_MS,
  RedisHealth,
} from '../../src/redis/health.js';
import { captureLogs } from '../helpers/logs.js';
import { ManualClock } from '../helpers/manual-clock.js';

const OOM = "OOM command not allowed when used memory > 'maxmemory'.";

describe('redis health', () => {
  it('recognises OOM answers, also inside an aborted MULTI, and lost connections', () => {
    expect(isRedisFull(new Error(OOM))).toBe(true);
    // ioredis: EXEC refused, the queued commands' OOM errors in previousErrors.
    const aborted = Object.assign(new Error('EXECABORT Transaction discarded because of previous errors.'), {
      previousErrors: [new Error(OOM)],
    });
    expect(isRedisFull(aborted)).toBe(true);
    expect(isRedisFull(new Error('ERR wrong number of arguments'))).toBe(false);
    expect(isRedisDown(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }))).toBe(
      true,
    );
    expect(isRedisDown(new Error('Connection is closed.'))).toBe(true);
    expect(isRedisDown(new Error(OOM))).toBe(false);
  });

  it('answers a full Redis as 507 REDIS_FULL naming maxmemory and how to resume', () => {
    const err = new RedisFullError('ingesting batch b', new Error(OOM));
    expect(isError(err, RedisFullError)).toBe(true);
    const body = describeError(err);
    expect(body).toMatchObject({ statusCode: 507, error: { code: 'REDIS_FULL' } });
    expect(body!.error.message).toMatch(/maxmemory.*run the same command again/);
    expect(body!.error.message).not.toContain('\n');
  });

  it('a paid write no replica confirmed waits as Redis down, said as such once, with what to do', () => {
    const logs = captureLogs();
    const health = new RedisHealth(logs.logger);
    const err = new RedisUnreplicatedError(0, 1, 1_000, false);
    expect(isRedisDown(err)).toBe(true);
    for (let i = 0; i < 5; i++) expect(health.outage(err)).toBe(true);
    expect(health.waitReason).toBe('redis_down');
    expect(describeError(err)).toMatchObject({ statusCode: 503, error: { code: 'REDIS_UNREPLICATED' } });
    expect(logs.lines).toHaveLength(1);
    expect(logs.lines[0]).toMatchObject({
      code: 'REDIS_UNREPLICATED',
      reason: expect.stringMatching(/0 of 1 replica/),
    });
    expect(logs.lines[0]!.msg).toMatch(/^no redis replica confirms paid writes.*VQ_REDIS_REPLICA_ACKS=0/);
    expect(new RedisUnreplicatedError(1, 1, 1_000, true).message).toMatch(/connection .* changed/);
  });

  it('logs one line per change of state, however many errors arrive', () => {
    const logs = captureLogs();
    const health = new RedisHealth(logs.logger);
    const states: string[] = [];
    health.onState((s) => states.push(s));
    for (let i = 0; i < 50; i++) health.report(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    expect(health.waitReason).toBe('redis_down');
    health.ok();
    health.ok();
    for (let i = 0; i < 50; i++) health.report(new Error(OOM));
    expect(health.waitReason).toBe('redis_full');
    health.ok();
    for (let i = 0; i < 5; i++) health.report(new Error('ERR something else'));
    expect(states).toEqual(['down', 'up', 'full', 'up']);
    expect(logs.lines.map((l) => l.msg)).toEqual([
      expect.stringMatching(/^redis connection lost/),
      'redis connection back',
      expect.stringMatching(/^redis is full/),
      'redis connection back',
      'redis client error',
    ]);
  });

  it('a Cluster slot being moved is retried, not a lost connection; said once only when it lasts', () => {
    const clk = new ManualClock();
    const logs = captureLogs();
    const health = new RedisHealth(logs.logger, clk);
    const states: string[] = [];
    health.onState((s) => states.push(s));
    const tryAgain = new Error('TRYAGAIN Multiple keys request during rehashing of slot');
    // Callers retry it as they retry an outage...
    expect(isRedisDown(tryAgain)).toBe(true);
    expect(isSlotMigrating(tryAgain)).toBe(true);
    expect(isSlotMigrating(new Error('ASK 3999 127.0.0.1:7002'))).toBe(true);
    // BullMQ's lock renewal (a script that builds its keys' names) meeting a lock already moved.
    const nonLocal =
      'ERR Script attempted to access a non local key in a cluster node script: c35baf769e5dc3d9194b2bceca04ab59f7c510f7, on @user_script:29.';
    expect(isSlotMigrating(new Error(nonLocal))).toBe(true);
    expect(isRedisDown(new Error(nonLocal))).toBe(true);
    expect(isSlotMigrating(new Error('connect ECONNREFUSED 127.0.0.1:6379'))).toBe(false);
    // ...but a reshard's few seconds of it change no state and say nothing (a CI run read
    // "redis connection lost" mid-reshard of a Cluster that never lost a connection).
    for (let i = 0; i < 40; i++) {
      expect(health.report(tryAgain, 'worker a')).toBe(true);
      clk.advance(100);
    }
    expect(health.state).toBe('up');
    expect(logs.lines).toEqual([]);
    // A quiet gap longer than the bound starts the count again.
    clk.advance(MIGRATION_SAID_AFTER_MS + 1);
    health.report(tryAgain);
    clk.advance(MIGRATION_SAID_AFTER_MS - 1_000);
    health.report(tryAgain);
    expect(logs.lines).toEqual([]);
    // A slot left half moved past the bound is one warning naming the fix, however long it lasts.
    for (let i = 0; i < 10; i++) {
      clk.advance(500);
      health.report(tryAgain);
    }
    expect(logs.lines.map((l) => [l.level, l.msg])).toEqual([[40, expect.stringMatching(/redis-cli --cluster fix/)]]);
    expect(states).toEqual([]);
    expect(health.waitReason).toBeUndefined();
  });
});
