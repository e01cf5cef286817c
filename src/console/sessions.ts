// The console's sessions, in Redis: the cookie holds a random id (256 bits); Redis holds, under the
// id's sha256 (a copy of the database gives no live cookie), the sha256 of the service token
// the operator signed in with and the session's CSRF token, for SESSION_TTL_MS. The token's digest
// is checked against the configured tokens on every request (TokenAuth.checkDigest), so removing a
// token from the configuration ends its sessions at once. Signing out deletes the key.
import { createHash, randomBytes } from 'node:crypto';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';

/** A session lasts a working day; then the operator signs in again. */
export const SESSION_TTL_MS = 12 * 3_600_000;
export const SESSION_COOKIE = 'vqb_session';

export interface Session {
  /** The cookie's value. */
  id: string;
  /** sha256 of the service token signed in with. */
  tokenDigest: Buffer;
  /** Sent back in every form the console posts. */
  csrf: string;
}

export const idHash = (id: string): string => createHash('sha256').update(id, 'utf8').digest('hex');

export class SessionStore {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;

  constructor(redis: RedisClient, keys: VqbKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async create(tokenDigest: Buffer): Promise<Session> {
    const session: Session = {
      id: randomBytes(32).toString('base64url'),
      tokenDigest,
      csrf: randomBytes(24).toString('base64url'),
    };
    const key = this.#keys.consoleSession(idHash(session.id));
    await this.#redis
      .multi()
      .hset(key, 'token', tokenDigest.toString('hex'), 'csrf', session.csrf)
      .pexpire(key, SESSION_TTL_MS)
      .exec();
    return session;
  }

  /** The session of a cookie value, or undefined (unknown, expired, malformed). */
  async get(id: string | undefined): Promise<Session | undefined> {
    if (id === undefined || !/^[A-Za-z0-9_-]{43}$/.test(id)) return undefined;
    const fields = await this.#redis.hgetall(this.#keys.consoleSession(idHash(id)));
    const token = fields.token;
    if (token === undefined || !/^[0-9a-f]{64}$/.test(token) || !fields.csrf) return undefined;
    return { id, tokenDigest: Buffer.from(token, 'hex'), csrf: fields.csrf };
  }

  async delete(id: string): Promise<void> {
    await this.#redis.del(this.#keys.consoleSession(idHash(id)));
  }
}
