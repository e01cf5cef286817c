// The shared first-poll schedule (queue/poll-schedule.ts) on real Redis: samples are sent
// together, at most every half second or at a flush, and move the estimate exactly as one call
// each did (the same steps, in the order taken, each weighed against the estimate in force).
import { afterEach, describe, expect, it } from 'vitest';
import { firstPollBounds, learnStep, PollLearner, RELEVANCE, sampleGain } from '../../src/queue/poll-schedule.js';
import { VqbKeys } from '../../src/redis/keys.js';
import { testConfig } from '../helpers/config.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

let ctx: RedisTestContext | undefined;
afterEach(async () => {
  await ctx?.cleanup();
  ctx = undefined;
});

/** What the samples make of the estimate, one at a time, as the script does. */
function expected(poll: ReturnType<typeof testConfig>['poll'], samples: [boolean, number][]): number {
  const { minMs, maxMs } = firstPollBounds(poll);
  const lo = Math.log(minMs / poll.initialMs);
  const hi = Math.log(maxMs / poll.initialMs);
  let v = 0;
  for (const [n, [pending, elapsedMs]] of samples.entries()) {
    const gap = Math.log(elapsedMs / poll.initialMs) - v;
    if ((pending && gap < -RELEVANCE) || (!pending && gap > RELEVANCE)) continue;
    // The first samples move it further (sampleGain), counted over every sample taken so far.
    v = Math.min(hi, Math.max(lo, v + learnStep(pending, poll.quantile) * sampleGain(n)));
  }
  return Math.round(poll.initialMs * Math.exp(v));
}

describe('poll learner', () => {
  it('sends the samples of half a second in one call; the estimate is the one a call each would give', async () => {
    ctx = await redisTestContext('learner');
    const config = testConfig(ctx.prefix);
    const keys = new VqbKeys({ prefix: ctx.prefix, queueName: config.queueName });
    const learner = new PollLearner(ctx.redis, keys, config.poll);
    const initial = config.poll.initialMs;
    // Pending near the estimate (later), finished near it (earlier), one too early to count.
    const samples: [boolean, number][] = [
      [true, initial],
      [true, initial * 1.1],
      [false, initial * 0.9],
      [true, initial * 0.2],
      [true, initial * 1.2],
    ];
    // Scripts this client sends (the Redis is shared with other tests: its own counters would not do).
    let scripts = 0;
    const send = ctx.redis.sendCommand.bind(ctx.redis);
    ctx.redis.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
      if (command.name === 'evalsha' || command.name === 'eval') scripts++;
      return (send as (...a: unknown[]) => unknown)(command, ...rest);
    }) as typeof ctx.redis.sendCommand;
    for (const [pending, ms] of samples) learner.observe('agregados', pending, ms);
    expect((await learner.snapshot('agregados')).samples).toBe(0);
    await new Promise((r) => setTimeout(r, 700));
    const snapshot = await learner.snapshot('agregados');
    expect(snapshot.samples).toBe(5);
    expect(snapshot.pendingAtFirstPoll).toBe(4);
    expect(snapshot.firstPollMs).toBe(expected(config.poll, samples));
    expect(snapshot.firstPollMs).toBeGreaterThan(initial);
    // One script for the five samples (an EVAL first if Redis did not know it yet).
    expect(scripts).toBeGreaterThanOrEqual(1);
    expect(scripts).toBeLessThanOrEqual(2);
    // A flush sends at once (a worker's stop).
    learner.observe('agregados', false, initial);
    await learner.flush();
    expect((await learner.snapshot('agregados')).samples).toBe(6);
    expect(await learner.firstPollDelay('agregados')).toBe(expected(config.poll, [...samples, [false, initial]]));
    // A send that fails (Redis refuses it) drops its samples, not the sends after it.
    const script = (ctx.redis as unknown as { vqbLearnObserve: (...a: unknown[]) => Promise<unknown> }).vqbLearnObserve;
    (ctx.redis as unknown as { vqbLearnObserve: unknown }).vqbLearnObserve = () => Promise.reject(new Error('refused'));
    learner.observe('agregados', true, initial);
    await expect(learner.flush()).rejects.toThrow('refused');
    (ctx.redis as unknown as { vqbLearnObserve: unknown }).vqbLearnObserve = script;
    learner.observe('agregados', true, initial);
    await learner.flush();
    expect((await learner.snapshot('agregados')).samples).toBe(7);
  });
});
