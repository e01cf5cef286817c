// The production line as a whole: paused because the key cannot work (every job would fail the
// same way), or slowed because the upstream asked us to wait. Both live in Redis, so every worker
// on every machine obeys them and status commands can say why nothing is moving.
import type { Redis } from 'ioredis';
import type { PlateQueue } from './plate-queue.js';
import type { VqbKeys } from './redis.js';

export type LimitReason = 'rate_limit' | 'quota';

export interface LinePause {
  code: string;
  message: string;
  at: number;
}

export interface LineState {
  /** The queue is paused (by a key failure or by an operator). */
  paused: boolean;
  /** Why, when a key failure paused it. */
  pause?: LinePause;
  /** Epoch ms until which no job starts, when the upstream asked us to wait. */
  limitedUntil?: number;
  limitReason?: LimitReason;
  /** Epoch ms until which creates wait because a key-wide spending cap (day or month) is reached. */
  budgetUntil?: number;
  budgetReason?: 'day' | 'month';
}

// Extend-only: a 429 that asks for 1 s must not cut short a quota pause of 6 h set by another worker.
const EXTEND_LIMIT = `
local pttl = redis.call('PTTL', KEYS[1])
local ms = tonumber(ARGV[1])
if pttl >= ms then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ms)
redis.call('HSET', KEYS[2], 'limitedUntil', ARGV[3], 'limitReason', ARGV[4])
return 1
`;

// Records a key failure once: the caller logs the fatal line only when this returns 1.
const PAUSE = `
if redis.call('HGET', KEYS[1], 'code') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'code', ARGV[1], 'message', ARGV[2], 'at', ARGV[3])
return 1
`;

// Adaptive spacing (AIMD): a 429 lengthens the gap between job starts (×1.25 + a tenth of the
// pacing interval), every answer without one shortens it by a fiftieth of the interval. With the
// configured limit above the upstream's real one, the line settles just under the real one instead
// of drawing a 429 every few requests. ARGV: event ('429' | 'ok'), pacing ms, cap ms, limiter value.
const ADAPT = `
local extra = tonumber(redis.call('HGET', KEYS[1], 'extraMs') or '0')
local pacing = tonumber(ARGV[2])
if ARGV[1] == '429' then
  extra = math.min(tonumber(ARGV[3]), extra * 1.25 + pacing * 0.1)
else
  if extra <= 0 then return '0' end
  extra = math.max(0, extra - pacing * 0.02)
end
redis.call('HSET', KEYS[1], 'extraMs', tostring(extra))
if ARGV[1] == 'ok' and extra > 0 and redis.call('PTTL', KEYS[2]) < extra then
  redis.call('SET', KEYS[2], ARGV[4], 'PX', math.ceil(extra))
end
return tostring(extra)
`;

interface LineCommands {
  vqbAdaptSpacing(line: string, limiter: string, event: string, pacingMs: number, capMs: number, max: string): Promise<string>;
  vqbExtendLimit(limiter: string, line: string, ms: number, max: string, until: number, reason: string): Promise<number>;
  vqbPauseLine(line: string, code: string, message: string, at: number): Promise<number>;
}

export class LineControl {
  readonly #queue: PlateQueue;
  readonly #redis: Redis & LineCommands;
  readonly #keys: VqbKeys;
  readonly #now: () => number;

  constructor(queue: PlateQueue, redis: Redis, keys: VqbKeys, now: () => number = Date.now) {
    redis.defineCommand('vqbExtendLimit', { numberOfKeys: 2, lua: EXTEND_LIMIT });
    redis.defineCommand('vqbPauseLine', { numberOfKeys: 1, lua: PAUSE });
    redis.defineCommand('vqbAdaptSpacing', { numberOfKeys: 2, lua: ADAPT });
    this.#queue = queue;
    this.#redis = redis as Redis & LineCommands;
    this.#keys = keys;
    this.#now = now;
  }

  /** Pauses the queue for every worker; true when this call recorded a new reason. */
  async pauseForKey(code: string, message: string): Promise<boolean> {
    const isNew = (await this.#redis.vqbPauseLine(this.#keys.line, code, message, this.#now())) === 1;
    await this.#queue.pause();
    return isNew;
  }

  /** Operator resume: clears the recorded reason and lets every worker take jobs again. */
  async resume(): Promise<void> {
    await this.#redis.hdel(this.#keys.line, 'code', 'message', 'at');
    await this.#queue.resume();
  }

  /** Operator pause, with the reason shown by status. */
  async pause(message = 'paused by an operator'): Promise<void> {
    await this.pauseForKey('PAUSED_BY_OPERATOR', message);
  }

  /**
   * No job starts on any worker for `ms`, unless a longer wait is already in force.
   * True when this call set or lengthened the wait.
   */
  async limitFor(ms: number, reason: LimitReason): Promise<boolean> {
    const wait = Math.max(1, Math.ceil(ms));
    const until = this.#now() + wait;
    return (await this.#redis.vqbExtendLimit(this.#queue.toKey('limiter'), this.#keys.line, wait, String(Number.MAX_SAFE_INTEGER), until, reason)) === 1;
  }

  /**
   * Feeds one upstream answer (a 429 or not) to the adaptive spacing and, after a normal answer
   * while the spacing is above zero, holds the next job start that much longer. Returns the extra
   * spacing now in force (ms), which callers cache to skip the call while it is 0.
   */
  async adaptSpacing(event: '429' | 'ok', pacingMs: number): Promise<number> {
    const cap = Math.max(1_000, pacingMs * 20);
    return Number(await this.#redis.vqbAdaptSpacing(this.#keys.line, this.#queue.toKey('limiter'), event, pacingMs, cap, String(Number.MAX_SAFE_INTEGER)));
  }

  async extraSpacing(): Promise<number> {
    return Number((await this.#redis.hget(this.#keys.line, 'extraMs')) ?? 0);
  }

  async state(): Promise<LineState> {
    const [fields, paused] = await Promise.all([this.#redis.hgetall(this.#keys.line), this.#queue.isPaused()]);
    const state: LineState = { paused };
    if (fields.code) state.pause = { code: fields.code, message: fields.message ?? '', at: Number(fields.at) };
    const until = Number(fields.limitedUntil);
    if (Number.isFinite(until) && until > this.#now()) {
      state.limitedUntil = until;
      state.limitReason = fields.limitReason === 'quota' ? 'quota' : 'rate_limit';
    }
    const budgetUntil = Number(fields.budgetUntil);
    if (Number.isFinite(budgetUntil) && budgetUntil > this.#now()) {
      state.budgetUntil = budgetUntil;
      state.budgetReason = fields.budgetReason === 'month' ? 'month' : 'day';
    }
    return state;
  }
}
