// The HTTP enqueue API: fastify with our error shape, service-token auth on /v1, zod-declared
// schemas validated per route and published as OpenAPI at /openapi.json. `vqb serve` creates it
// and calls `.listen({ host, port })`; tests listen on 127.0.0.1:0.
//
//   GET  /healthz                    no token: Redis and the line
//   GET  /openapi.json               no token: the OpenAPI 3 document
//   POST /v1/batches                 JSON plates, a text/csv body or a multipart CSV upload → 202 the batch
//   GET  /v1/batches                 newest first, ?offset&limit
//   GET  /v1/batches/:id             counts, progress, waiting, ETA
//   GET  /v1/batches/:id/results     ?format=jsonl|csv, streamed
//   POST /v1/batches/:id/retry       {recreate?}
//   GET  /metrics                    no token: Prometheus metrics (when `metrics` is given;
// per-batch gauges need an administrator token)
//   GET  /admin/queues               Bull Board, read-only, behind the same token check as /v1 or an
//                                    administrator's console session
//   GET  /, /batches/:id, /upload …  the web console (src/console/routes.ts), behind its session
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import { mountDashboard } from './api/dashboard.js';
import { v1Routes } from './api/routes/batches.js';
import { healthRoutes } from './api/routes/health.js';
import { clock } from './clock.js';
import type { Config } from './config.js';
import type { ConsoleLimits } from './console/limits.js';
import { type ConsoleHandle, registerConsole } from './console/routes.js';
import { TokenAuth } from './http/auth.js';
import { describeError, errorBody, errorCodeOf, installErrorHandlers, sendError } from './http/errors.js';
import { openApiRoute, registerOpenApi } from './http/openapi.js';
import { loggedUrl, serverOptions } from './http/transport.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import { WorkerPresence } from './queue/presence.js';
import type { RedisHealth } from './redis/health.js';
import type { QueueServices } from './services.js';

export interface HttpApiDeps {
  services: QueueServices;
  config: Config;
  logger: Logger;
  /** Served at /metrics; the caller registers what it measures (queue gauges, in-process workers). */
  metrics?: Metrics;
  /** Mount Bull Board at /admin/queues (default true). */
  dashboard?: boolean;
  /** Serve the web console at / (default true). */
  console?: boolean;
  /** This process's view of Redis (full, down): the console shows it as why a line waits. */
  health?: Pick<RedisHealth, 'waitReason'>;
  now?: () => number;
  /** The console's limits (src/console/limits.ts), smaller in tests. */
  consoleLimits?: Partial<ConsoleLimits>;
}

export async function createHttpApi(deps: HttpApiDeps): Promise<FastifyInstance> {
  const { services, config, logger } = deps;
  const now = deps.now ?? clock.now;
  // Widened to fastify's logger type, so the instance is the plain FastifyInstance callers expect.
  const loggerInstance: FastifyBaseLogger = logger;
  const app = Fastify({
    loggerInstance,
    // One line per request, written in onResponse below (fastify's default is two).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.http.bodyLimit,
    // Only the configured proxies' X-Forwarded-* count (request.protocol: the console's Secure cookie).
    ...(config.http.trustProxy ? { trustProxy: config.http.trustProxy } : {}),
    // Request and idle timeouts, and Node's parser errors in our error shape (transport.ts).
    ...serverOptions(config.http),
    // While closing, requests in flight finish; new ones get our error shape from the handler.
    return503OnClosing: false,
    // Errors fastify raises before routing (a malformed URL) answer in our shape too.
    frameworkErrors: (err, request, reply) => {
      sendError(request, reply, describeError(err) ?? errorBody(400, 'BAD_REQUEST', err.message));
    },
  });

  // Responses are built from the zod types (schemas.ts); the response schemas document them, and
  // plain JSON.stringify sends exactly what the handler built.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  installErrorHandlers(app, () => services.redis.status !== 'ready');

  app.addHook('onResponse', async (request, reply) => {
    const code = errorCodeOf(request);
    const line = {
      method: request.method,
      url: loggedUrl(request.url),
      statusCode: reply.statusCode,
      ms: Math.round(reply.elapsedTime),
      ...(code ? { code } : {}),
    };
    // Probes hit /healthz every few seconds: only its failures are worth an info line.
    if (request.url === '/healthz' && reply.statusCode === 200) request.log.debug(line, 'request');
    else request.log.info(line, 'request');
  });

  await registerOpenApi(app);

  // Throws ConfigError when a configured service token is an upstream key.
  const auth = await TokenAuth.fromConfig(config, logger);
  healthRoutes(app, services, auth);
  openApiRoute(app, config.webhooks.publicUrl);
  await app.register(v1Routes, { prefix: '/v1', services, config, auth, now });
  if (deps.metrics) {
    const metrics = deps.metrics;
    app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
      // The per-batch gauges name batch ids: only an administrator's token scrapes them.
      const scope = await auth.check(request.headers).catch(() => undefined);
      const { contentType, body } = await metrics.render(request.headers.accept, { perBatch: scope?.admin === true });
      return reply.type(contentType).send(body);
    });
  }
  let consoleHandle: ConsoleHandle | undefined;
  if (deps.console !== false)
    consoleHandle = await registerConsole(app, {
      services,
      config,
      auth,
      logger,
      now,
      ...(deps.health ? { health: deps.health } : {}),
      ...(deps.consoleLimits ? { limits: deps.consoleLimits } : {}),
    });
  if (deps.dashboard !== false) {
    // Answered here, in our error shape: errors thrown inside Bull Board's scope meet its own handler.
    // Its workers are vqb's worker processes, as their heartbeat says (Bull Board's CLIENT LIST cannot see them).
    const presence = new WorkerPresence(services.redis, services.keys, now);
    const workers = { list: () => presence.list(), now };
    await mountDashboard(app, services.accounts.queues(), workers, async (request, reply) => {
      try {
        // A browser comes with the console's session; a client with a token in a header.
        const session = await consoleHandle?.sessionScope(request);
        const scope = session ?? (await auth.check(request.headers));
        // The dashboard shows every account's queue: administrators only.
        if (!scope.admin) return sendError(request, reply, errorBody(404, 'NOT_FOUND', 'not found'));
        // It is read-only; with a cookie, nothing but reading is accepted at all (no request a
        // cookie carries can change anything here).
        if (session && request.method !== 'GET' && request.method !== 'HEAD') {
          return sendError(
            request,
            reply,
            errorBody(
              403,
              'QUEUE_READ_ONLY',
              'the queue dashboard is read-only: retry failed plates in the console or with `vqb retry`',
            ),
          );
        }
      } catch (err) {
        return sendError(request, reply, describeError(err) ?? errorBody(500, 'INTERNAL', 'internal error'));
      }
      return undefined;
    });
  }
  return app;
}
