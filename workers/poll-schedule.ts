// When to poll a query. Polls cost the same quota as creates, so the aim is one poll per plate:
// the first poll is placed at the q-quantile of the time queries take to finish (q = 0.9 by
// default), learned online and shared by every worker in Redis. The learner needs no completion
// timestamps from the upstream: each first poll is a yes/no sample ("finished by d?"), and the
// update below (stochastic quantile approximation, in log space) settles where a share q of first
// polls find the query finished. Later polls back off exponentially up to a cap.
import type { Redis } from 'ioredis';
import type { Config } from '../src/config.js';
import type { VqbKeys } from '../src/queue/redis.js';
import { backoffDelay } from '../src/upstream/timing.js';

export type PollSettings = Config['poll'];

/** Bounds the learned first-poll delay: never below 50 ms, never past half the deadline. */
export function firstPollBounds(poll: PollSettings): { minMs: number; maxMs: number } {
  return { minMs: 50, maxMs: Math.max(50, Math.floor(poll.deadlineMs / 2)) };
}

/**
 * The change in log(delay) after one first poll. Pending → later by η·q; finished → earlier by
 * η·(1−q). In equilibrium a share (1−q) of first polls find the query pending.
 */
export function learnStep(pendingAtFirstPoll: boolean, quantile: number, eta = 0.15): number {
  return pendingAtFirstPoll ? eta * quantile : -eta * (1 - quantile);
}

/** Wait before poll number `pollsSoFar + 1`, after `pollsSoFar` polls found the query pending. */
export function nextPollDelay(pollsSoFar: number, poll: PollSettings, random: () => number = Math.random): number {
  return backoffDelay(Math.max(0, pollsSoFar - 1), poll.intervalMs, poll.maxIntervalMs, random);
}

const OBSERVE = `
local v = tonumber(redis.call('HINCRBYFLOAT', KEYS[1], 'logOffset', ARGV[1]))
local lo, hi = tonumber(ARGV[2]), tonumber(ARGV[3])
if v < lo then v = lo redis.call('HSET', KEYS[1], 'logOffset', tostring(lo)) end
if v > hi then v = hi redis.call('HSET', KEYS[1], 'logOffset', tostring(hi)) end
redis.call('HINCRBY', KEYS[1], ARGV[4], 1)
return tostring(v)
`;

interface LearnerCommands {
  vqbLearnObserve(key: string, delta: number, lo: number, hi: number, field: string): Promise<string>;
}

export interface LearnedSchedule {
  firstPollMs: number;
  samples: number;
  pendingAtFirstPoll: number;
}

/**
 * The first-poll delay, stored as log(delay / initial) so a fresh key means "the configured
 * initial delay" and concurrent updates are a single HINCRBYFLOAT. Reads are cached briefly:
 * one Redis read per second per process, not one per create.
 */
export class PollLearner {
  readonly #redis: Redis & LearnerCommands;
  readonly #keys: VqbKeys;
  readonly #poll: PollSettings;
  readonly #now: () => number;
  readonly #cache = new Map<string, { at: number; ms: number }>();

  constructor(redis: Redis, keys: VqbKeys, poll: PollSettings, now: () => number = Date.now) {
    redis.defineCommand('vqbLearnObserve', { numberOfKeys: 1, lua: OBSERVE });
    this.#redis = redis as Redis & LearnerCommands;
    this.#keys = keys;
    this.#poll = poll;
    this.#now = now;
  }

  #fromOffset(offset: number): number {
    const { minMs, maxMs } = firstPollBounds(this.#poll);
    return Math.min(maxMs, Math.max(minMs, Math.round(this.#poll.initialMs * Math.exp(offset))));
  }

  async firstPollDelay(product: string): Promise<number> {
    if (!this.#poll.adaptive) return this.#poll.initialMs;
    const now = this.#now();
    const cached = this.#cache.get(product);
    if (cached && now - cached.at < 1_000) return cached.ms;
    const raw = await this.#redis.hget(this.#keys.learner(product), 'logOffset');
    const ms = this.#fromOffset(raw ? Number(raw) : 0);
    this.#cache.set(product, { at: now, ms });
    return ms;
  }

  async observe(product: string, pendingAtFirstPoll: boolean): Promise<void> {
    if (!this.#poll.adaptive) return;
    const { minMs, maxMs } = firstPollBounds(this.#poll);
    const lo = Math.log(minMs / this.#poll.initialMs);
    const hi = Math.log(maxMs / this.#poll.initialMs);
    const offset = Number(
      await this.#redis.vqbLearnObserve(this.#keys.learner(product), learnStep(pendingAtFirstPoll, this.#poll.quantile), lo, hi, pendingAtFirstPoll ? 'pending' : 'finished'),
    );
    this.#cache.set(product, { at: this.#now(), ms: this.#fromOffset(offset) });
  }

  async snapshot(product: string): Promise<LearnedSchedule> {
    const fields = await this.#redis.hgetall(this.#keys.learner(product));
    const pending = Number(fields.pending ?? 0);
    const finished = Number(fields.finished ?? 0);
    return { firstPollMs: this.#fromOffset(Number(fields.logOffset ?? 0)), samples: pending + finished, pendingAtFirstPoll: pending };
  }
}
