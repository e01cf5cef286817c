import { startWorker, type WorkerHandle } from '../../workers/worker.js';
import { clock } from '../clock.js';
import { UsageError } from '../errors.js';
import { Metrics } from '../metrics.js';
import { createInboxWatcher } from '../producers/inbox.js';
import { waitForRedisAtStart } from '../redis/connection.js';
import { RedisHealth } from '../redis/health.js';
import { Retention, startRetentionSweep, sweepInterval } from '../retention.js';
import { createHttpApi } from '../server.js';
import { openQueueServices } from '../services.js';
import { parseDuration } from '../setting-values.js';
import { archiveFor } from '../sinks/export.js';
import type { Command } from './command.js';

export const serveCommand: Command = {
  handlesStop: true,
  usage: `vqb serve [--port N] [--host H] [--no-inbox] [--workers] [--shutdown-timeout 30s]
  HTTP on VQ_HTTP_HOST:VQ_HTTP_PORT (--host, --port): /v1/batches (service tokens from VQ_API_TOKENS[_FILE]),
  /healthz, /openapi.json, /metrics, /admin/queues, and the web console at / (sign in with a
  service token). Watches <VQ_ROOT>/inbox/ unless --no-inbox.
  --workers also runs workers in this process (a one-box setup); otherwise run \`vqb work\`.
  SIGTERM/SIGINT: stop taking requests and files, finish what is running, exit.`,
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    'no-inbox': { type: 'boolean' },
    workers: { type: 'boolean' },
    'shutdown-timeout': { type: 'string' },
  },
  async run(ctx) {
    // --port / --host are VQ_HTTP_PORT / VQ_HTTP_HOST for this process, checked as the settings are.
    const config = ctx.configWith({
      ...(typeof ctx.flags.port === 'string' ? { VQ_HTTP_PORT: ctx.flags.port } : {}),
      ...(typeof ctx.flags.host === 'string' ? { VQ_HTTP_HOST: ctx.flags.host } : {}),
    });
    const logger = ctx.logger(config);
    const timeoutMs = parseDuration(String(ctx.flags['shutdown-timeout'] ?? '30s'));
    if (timeoutMs === undefined) throw new UsageError('--shutdown-timeout takes a duration such as 30s');
    // Started while Redis is away (a restart, services coming up in any order): wait for it.
    if (!(await waitForRedisAtStart(config, logger, ctx.io.stopSignal))) return 0;
    // One view of Redis for the process: an outage is a few JSON lines (lost, back, full).
    const health = new RedisHealth(logger);
    const services = await openQueueServices(config, { warn: (message) => logger.warn(message), health });
    const metrics = new Metrics({ accounts: config.accounts });
    metrics.observeQueue(services, health);
    let worker: WorkerHandle | undefined;
    let sweep: { stop(): void } | undefined;
    if (ctx.flags.workers) {
      worker = startWorker(config, { logger, metrics, health });
      // The workers' retention sweep (vqb work runs it too; a Redis lock lets one process at a time).
      const retention = new Retention(services, archiveFor(config), { retainMs: config.retention.retainMs, logger });
      sweep = startRetentionSweep(retention, { everyMs: sweepInterval(config.retention.retainMs), logger, health });
    }
    // A start-up error (a service token that is an upstream key) lets go of Redis and the workers.
    const app = await createHttpApi({ services, config, logger, metrics, health }).catch(async (err: unknown) => {
      await Promise.all([worker?.close(), services.close()]);
      throw err;
    });
    const inbox = ctx.flags['no-inbox'] ? undefined : createInboxWatcher({ services, config, logger });
    try {
      // A port in use (another serve) lets go of the workers too: the error is one line, exit 2.
      const address = await app
        .listen({ host: config.http.host, port: config.http.port })
        .catch(async (err: unknown) => {
          await Promise.all([app.close(), worker?.close()]);
          sweep?.stop();
          throw err;
        });
      inbox?.start();
      logger.info({ address, inbox: inbox ? config.root : false, workers: Boolean(worker) }, 'serving');
      ctx.print(`vqb serving on ${address}${inbox ? `; drop folder ${config.root}/inbox` : ''}`);
      const signal = await ctx.io.stopSignal;
      logger.info({ signal }, 'stopping');
      const timer = clock.setTimeout(() => {
        logger.error({ timeoutMs }, 'did not stop in time; exiting');
        process.exit(1);
      }, timeoutMs);
      sweep?.stop();
      await Promise.all([app.close(), inbox?.stop(), worker?.close()]);
      clock.clearTimeout(timer);
      return 0;
    } finally {
      await services.close();
      health.close();
      logger.flush();
    }
  },
};
