// Per-key request limiters, pure: every method takes `now` (ms) and nothing reads a clock.
// Callers `peek` first and `take` only when the request will be counted, so a request turned
// away (by this limiter or by the daily quota) costs nothing.
import type { WindowKind } from './options.js';

export interface LimitState {
  /** Slots left now (after a `take`, the slots left after that request). */
  remaining: number;
  /**
   * When the next slot frees up: window end (fixed), oldest entry leaving (sliding), next token
   * (bucket). `now` when nothing is in use.
   */
  resetAtMs: number;
  /** 0 when a request may pass now, else the exact wait until one may. */
  retryAfterMs: number;
}

export interface Limiter {
  readonly kind: WindowKind;
  readonly max: number;
  readonly durationMs: number;
  peek(now: number): LimitState;
  /** Counts one request. Call only after `peek(now).retryAfterMs === 0`. */
  take(now: number): LimitState;
}

export interface LimitSpec {
  max: number;
  durationMs: number;
}

export function createLimiter(kind: WindowKind, spec: LimitSpec): Limiter {
  switch (kind) {
    case 'fixed':
      return new FixedWindow(spec);
    case 'sliding':
      return new SlidingWindow(spec);
    case 'token-bucket':
      return new TokenBucket(spec);
  }
}

/** Windows aligned to multiples of the duration since the epoch; lets up to 2×max through across a boundary. */
export class FixedWindow implements Limiter {
  readonly kind = 'fixed' as const;
  readonly max: number;
  readonly durationMs: number;
  #windowStart = Number.NEGATIVE_INFINITY;
  #count = 0;

  constructor(spec: LimitSpec) {
    this.max = spec.max;
    this.durationMs = spec.durationMs;
  }

  #roll(now: number): number {
    const start = Math.floor(now / this.durationMs) * this.durationMs;
    if (start !== this.#windowStart) {
      this.#windowStart = start;
      this.#count = 0;
    }
    return start + this.durationMs;
  }

  peek(now: number): LimitState {
    const end = this.#roll(now);
    const remaining = this.max - this.#count;
    return { remaining, resetAtMs: this.#count === 0 ? now : end, retryAfterMs: remaining > 0 ? 0 : end - now };
  }

  take(now: number): LimitState {
    this.#roll(now);
    this.#count += 1;
    return this.peek(now);
  }
}

/**
 * At most `max` requests in any interval of `durationMs` ending now: a ring of the last `max`
 * counted timestamps. A request at time t occupies a slot until t + durationMs.
 */
export class SlidingWindow implements Limiter {
  readonly kind = 'sliding' as const;
  readonly max: number;
  readonly durationMs: number;
  readonly #ring: Float64Array;
  #head = 0;
  #count = 0;

  constructor(spec: LimitSpec) {
    this.max = spec.max;
    this.durationMs = spec.durationMs;
    this.#ring = new Float64Array(spec.max);
  }

  #evict(now: number): void {
    while (this.#count > 0 && this.#ring[this.#head]! + this.durationMs <= now) {
      this.#head = (this.#head + 1) % this.max;
      this.#count -= 1;
    }
  }

  peek(now: number): LimitState {
    this.#evict(now);
    const remaining = this.max - this.#count;
    const oldestFreesAt = this.#count > 0 ? this.#ring[this.#head]! + this.durationMs : now;
    return { remaining, resetAtMs: oldestFreesAt, retryAfterMs: remaining > 0 ? 0 : oldestFreesAt - now };
  }

  take(now: number): LimitState {
    this.#evict(now);
    this.#ring[(this.#head + this.#count) % this.max] = now;
    this.#count += 1;
    return this.peek(now);
  }
}

/** Capacity `max`, refilled continuously at max/durationMs; starts full (a burst of `max`, then steady). */
export class TokenBucket implements Limiter {
  readonly kind = 'token-bucket' as const;
  readonly max: number;
  readonly durationMs: number;
  readonly #msPerToken: number;
  #tokens: number;
  #last = Number.NaN;

  constructor(spec: LimitSpec) {
    this.max = spec.max;
    this.durationMs = spec.durationMs;
    this.#msPerToken = spec.durationMs / spec.max;
    this.#tokens = spec.max;
  }

  #refill(now: number): void {
    if (!Number.isNaN(this.#last) && now > this.#last) {
      this.#tokens = Math.min(this.max, this.#tokens + (now - this.#last) / this.#msPerToken);
    }
    if (Number.isNaN(this.#last) || now > this.#last) this.#last = now;
  }

  peek(now: number): LimitState {
    this.#refill(now);
    // The epsilon keeps 0.9999999997 tokens (float drift) from costing a whole extra token period.
    const whole = Math.floor(this.#tokens + 1e-9);
    const nextTokenAt = whole >= this.max ? now : now + Math.max(0, (whole + 1 - this.#tokens) * this.#msPerToken);
    return { remaining: whole, resetAtMs: nextTokenAt, retryAfterMs: whole >= 1 ? 0 : nextTokenAt - now };
  }

  take(now: number): LimitState {
    this.#refill(now);
    this.#tokens = Math.max(0, this.#tokens - 1);
    return this.peek(now);
  }
}

/** The `Retry-After` header value: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
