// Requests per minute for /v1, counted in Redis so every `vqb serve` process shares one count
// (@fastify/rate-limit's Redis store). A valid service token has its own count
// (VQ_API_RATE_LIMIT a minute); requests with no token or a wrong one count against their
// address, at most GUESSES_PER_MIN a minute, so guessing tokens from one address is slow while
// that address's real clients go on under their tokens' own counts. Past it: 429
// TOO_MANY_REQUESTS in our error shape, with Retry-After.
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RedisClient } from '../redis/connection.js';
import { presentedToken, sha256 } from './auth.js';
import { ApiError } from './errors.js';

/** Requests a minute from one address without a valid token (wrong tokens included). */
export const GUESSES_PER_MIN = 30;

/**
 * Counts a request under its valid token, or under its address when its token is missing or wrong
 * (the caller checked it once); throws TOO_MANY_REQUESTS past that key's limit.
 */
export type CountRequest = (request: FastifyRequest, reply: FastifyReply, validToken: boolean) => Promise<void>;

export async function registerApiRateLimit(
  app: FastifyInstance,
  options: { redis: RedisClient; nameSpace: string; perMinute: number },
): Promise<CountRequest> {
  if (options.perMinute <= 0) return async () => {};
  const valid = new WeakSet<FastifyRequest>();
  const keyOf = (request: FastifyRequest): string => {
    const token = presentedToken(request.headers);
    return token !== undefined && valid.has(request)
      ? `t:${sha256(token).toString('hex').slice(0, 32)}`
      : `a:${request.ip}`;
  };
  // Not a route hook of its own (those run after the token check, which refuses a guess first): the
  // caller counts each request before checking its token, and this answers in our error shape.
  await app.register(rateLimit, { global: false, redis: options.redis, nameSpace: options.nameSpace });
  const limit = app.createRateLimit({
    timeWindow: 60_000,
    keyGenerator: keyOf,
    max: (_request, key) => (key.startsWith('t:') ? options.perMinute : Math.min(options.perMinute, GUESSES_PER_MIN)),
    // Redis unreachable: the requests still meet the token check and Redis's own errors.
    skipOnError: true,
  });
  return async (request, reply, validToken) => {
    if (validToken) valid.add(request);
    const counted = await limit(request);
    if (counted.isAllowed || !counted.isExceeded) return;
    reply.header('retry-after', String(counted.ttlInSeconds));
    const who = counted.key.startsWith('t:') ? 'with this token' : 'from this address without a valid token';
    throw new ApiError(
      'TOO_MANY_REQUESTS',
      `more than ${counted.max} requests a minute ${who}; try again in ${counted.ttlInSeconds} s`,
    );
  };
}
