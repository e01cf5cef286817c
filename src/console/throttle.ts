// Failed console sign-ins, counted per client address in Redis so every serve process shares the
// count (issue 35, 11): after `signInFailures` within `signInWindowMs` (from the first), the
// address's next sign-in is refused with 429 and Retry-After until the window ends, the right
// token too (else the lock would still answer which guess was right). Only failures count: an
// office behind one address signs in many times a morning.
//
// Our own counter rather than @fastify/rate-limit: the plugin (10.3) counts every request its hook
// sees, before the handler runs, and has no option to count only the ones that failed (no
// skipSuccessfulRequests); its allowList is asked before the token is checked, and exempting a
// valid token from the limit would tell a locked-out guesser which guess was right.
import { createHash } from 'node:crypto';
import type { VqbKeys } from '../queue/keys.js';
import type { RedisClient } from '../queue/redis.js';
import type { ConsoleLimits } from './limits.js';

export class SignInThrottle {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;
  readonly #limits: Pick<ConsoleLimits, 'signInFailures' | 'signInWindowMs'>;

  constructor(redis: RedisClient, keys: VqbKeys, limits: Pick<ConsoleLimits, 'signInFailures' | 'signInWindowMs'>) {
    this.#redis = redis;
    this.#keys = keys;
    this.#limits = limits;
  }

  #key(address: string): string {
    return this.#keys.consoleSignInFailures(createHash('sha256').update(address, 'utf8').digest('hex'));
  }

  /** How long the address must wait before it may try again, ms; 0: it may now. */
  async waitMs(address: string): Promise<number> {
    const key = this.#key(address);
    const [count, ttl] = await Promise.all([this.#redis.get(key), this.#redis.pttl(key)]);
    if (Number(count ?? 0) < this.#limits.signInFailures) return 0;
    return ttl > 0 ? ttl : this.#limits.signInWindowMs;
  }

  /** Counts a failed sign-in of the address (the window starts with its first failure). */
  async failed(address: string): Promise<void> {
    const key = this.#key(address);
    await this.#redis.multi().set(key, '0', 'PX', this.#limits.signInWindowMs, 'NX').incr(key).exec();
  }
}
