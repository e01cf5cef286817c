// Failed console sign-ins, counted per client address in Redis so every serve process shares the
// count (issue 35, 11): after `signInFailures` within `signInWindowMs` (from the first), the
// address's next sign-in is refused with 429 and Retry-After until the window ends, the right
// token too (else the lock would still answer which guess was right). Only failures count: an
// office behind one address signs in many times a morning. An attempt is counted when it starts
// and given back when it did not fail (sign-in-attempt-1.lua), so a burst of guesses sent at
// once gets no more than the limit through.
//
// Our own counter rather than @fastify/rate-limit: the plugin (10.3) counts every request its hook
// sees, before the handler runs, and has no option to count only the ones that failed (no
// skipSuccessfulRequests); its allowList is asked before the token is checked, and exempting a
// valid token from the limit would tell a locked-out guesser which guess was right.
import { createHash } from 'node:crypto';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import type { ConsoleLimits } from './limits.js';

type ThrottleLimits = Pick<ConsoleLimits, 'signInFailures' | 'signInWindowMs'>;

export class SignInThrottle {
  readonly #redis: Scripted<'sign-in-attempt'>;
  readonly #keys: VqbKeys;
  readonly #limits: ThrottleLimits;

  constructor(redis: RedisClient, keys: VqbKeys, limits: ThrottleLimits) {
    this.#redis = withScripts(redis, ['sign-in-attempt']);
    this.#keys = keys;
    this.#limits = limits;
  }

  #key(address: string): string {
    return this.#keys.consoleSignInFailures(createHash('sha256').update(address, 'utf8').digest('hex'));
  }

  /** Counts an attempt of the address: 0 when it may go on, else how long to wait, ms. */
  async take(address: string): Promise<number> {
    const [allowed, ttl] = (await this.#redis.vqbSignInAttempt(
      this.#key(address),
      'take',
      this.#limits.signInWindowMs,
      this.#limits.signInFailures,
    )) as [number, number];
    return allowed === 1 ? 0 : Math.max(ttl, 1);
  }

  /** Gives an attempt back: it did not fail (signed in, or refused before its token was checked). */
  async refund(address: string): Promise<void> {
    await this.#redis.vqbSignInAttempt(this.#key(address), 'refund', this.#limits.signInWindowMs, 0);
  }
}
