// GET /healthz, without a token: can this process reach Redis, and is the line moving?

import type { FastifyInstance } from 'fastify';
import { clock } from '../../clock.js';
import { canSee, type TokenAuth } from '../../http/auth.js';
import { jsonReply } from '../../http/openapi.js';
import type { RedisClient } from '../../redis/connection.js';
import type { HealthReply } from '../../schemas/api.js';
import type { QueueServices } from '../../services.js';
import { lineView } from '../views.js';

const PING_TIMEOUT_MS = 1_000;

/** True when Redis answers PING within the timeout; a client that is not connected is not asked. */
export async function redisAnswers(redis: RedisClient, timeoutMs = PING_TIMEOUT_MS): Promise<boolean> {
  if (redis.status !== 'ready') return false;
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = await Promise.race([
      redis.ping(),
      new Promise<undefined>((resolve) => {
        timer = clock.setTimeout(() => resolve(undefined), timeoutMs);
      }),
    ]);
    return answer === 'PONG';
  } catch {
    return false;
  } finally {
    clock.clearTimeout(timer);
  }
}

export function healthRoutes(
  app: FastifyInstance,
  services: Pick<QueueServices, 'redis' | 'accounts'> & Partial<Pick<QueueServices, 'pools'>>,
  auth: Pick<TokenAuth, 'check'>,
): void {
  app.get(
    '/healthz',
    {
      schema: {
        summary: "Liveness and each account's line",
        description:
          "No token needed: without one, only `status` and `redis` (a probe's answer). With a " +
          "service token, `accounts` too: each of the token's accounts (an administrator's: every " +
          'one). 503 when Redis cannot be reached. `degraded` when an account is paused (key ' +
          "failure, operator), its upstream is unreachable (each account's `upstream` says since " +
          "when, and when it came back), waiting for the upstream's quota or held by a spending " +
          'cap; a short rate-limit wait is normal and stays `ok`.',
        operationId: 'getHealth',
        tags: ['operations'],
        security: [],
        response: {
          200: jsonReply('Health', 'Redis answers'),
          '4xx': jsonReply('Error', 'BAD_REQUEST (an unreadable URL), HEADERS_TOO_LARGE'),
          503: jsonReply('Health', 'Redis is unreachable'),
        },
      },
    },
    async (request, reply) => {
      const down: HealthReply = { status: 'degraded', redis: 'down' };
      if (!(await redisAnswers(services.redis))) return reply.code(503).send(down);
      const all = await services.accounts.states().catch(() => undefined);
      if (all === undefined) return reply.code(503).send(down);
      // Account ids, rates and pause reasons are for a token's holder, not for anyone who can reach the port.
      const scope = await auth.check(request.headers).catch(() => undefined);
      const lines = all.filter((line) => scope !== undefined && canSee(scope, line.account));
      const stuck = lines.some(
        (line) =>
          line.paused ||
          line.pause !== undefined ||
          line.unreachable !== undefined ||
          line.limitReason === 'quota' ||
          line.budgetUntil !== undefined,
      );
      const pools =
        scope !== undefined && services.pools !== undefined
          ? (await services.pools.states().catch(() => [])).filter((p) => p.keys.every((k) => canSee(scope, k.account)))
          : [];
      const body: HealthReply = {
        status: stuck ? 'degraded' : 'ok',
        redis: 'ok',
        ...(scope !== undefined ? { accounts: lines.map((line) => lineView(line)) } : {}),
        ...(pools.length > 0 ? { pools } : {}),
      };
      return reply.send(body);
    },
  );
}
