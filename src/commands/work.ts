import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { startWorker } from '../../workers/worker.js';
import { pacingIntervalMs } from '../accounts/account.js';
import { clock } from '../clock.js';
import { Metrics } from '../metrics.js';
import { waitForRedisAtStart } from '../redis/connection.js';
import { checkLayoutAtStart } from '../redis/layout.js';
import { Retention, startRetentionSweep, sweepInterval } from '../retention.js';
import { parseDuration } from '../setting-values.js';
import { archiveFor } from '../sinks/export.js';
import type { Command } from './command.js';

/** A bare /metrics endpoint for a worker process (the API's /metrics lives in `vqb serve`). */
async function serveMetrics(metrics: Metrics, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    metrics.render(req.headers.accept).then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
      () => res.writeHead(500).end(),
    );
  });
  server.listen(port);
  await once(server, 'listening');
  return server;
}

/**
 * Test hooks, off unless the variable is set (never in production): VQB_TEST_STOP_AFTER_FENCE=1
 * stops this process (SIGSTOP) once, right after its first create passed the fencing check and
 * before it is sent, so a test can show the next owner flags the create it sends again.
 */
function testHooks(): { afterFence?: () => Promise<void> } {
  if (process.env.VQB_TEST_STOP_AFTER_FENCE !== '1') return {};
  let stopped = false;
  return {
    afterFence: async () => {
      if (stopped) return;
      stopped = true;
      process.kill(process.pid, 'SIGSTOP');
    },
  };
}

export const workCommand: Command = {
  handlesStop: true,
  usage: `vqb work [--concurrency N] [--metrics-port N] [--shutdown-timeout 30s]
  Takes plate jobs from the queue until SIGTERM/SIGINT, then stops taking jobs, lets the running
  requests finish and their results persist, and exits. With --metrics-port (VQ_METRICS_PORT),
  serves Prometheus metrics on http://0.0.0.0:N/metrics.`,
  options: { 'shutdown-timeout': { type: 'string' }, 'metrics-port': { type: 'string' } },
  async run(ctx) {
    const config =
      typeof ctx.flags['metrics-port'] === 'string'
        ? ctx.configWith({ VQ_METRICS_PORT: ctx.flags['metrics-port'] })
        : ctx.config();
    const logger = ctx.logger(config);
    if (!(await waitForRedisAtStart(config, logger, ctx.io.stopSignal))) {
      logger.info('stopped before Redis was reachable');
      logger.flush();
      return 0;
    }
    await checkLayoutAtStart(config);
    const metrics = config.metricsPort ? new Metrics({ accounts: config.accounts }) : undefined;
    // The port first: a port in use is a command to fix (one line, exit 2), before any job is taken.
    const metricsServer = metrics && config.metricsPort ? await serveMetrics(metrics, config.metricsPort) : undefined;
    const handle = startWorker(config, { logger, ...(metrics ? { metrics } : {}), ...testHooks() });
    // Retention: one process at a time (a lock in Redis) archives and prunes finished batches past VQ_RETAIN.
    const retention = new Retention(handle.services, archiveFor(config), {
      retainMs: config.retention.retainMs,
      logger,
    });
    const sweep = startRetentionSweep(retention, {
      everyMs: sweepInterval(config.retention.retainMs),
      logger,
      health: handle.health,
    });
    logger.info(
      {
        queue: config.queueName,
        concurrency: config.concurrency,
        accounts: config.accounts.map((a) => ({
          id: a.id,
          rateLimit: a.rateLimit.text,
          intervalMs: Math.round(pacingIntervalMs(a, config.pacingJitterMs) * 10) / 10,
        })),
        metricsPort: config.metricsPort,
      },
      'worker started',
    );
    const signal = await ctx.io.stopSignal;
    const timeoutMs = parseDuration(String(ctx.flags['shutdown-timeout'] ?? '30s')) ?? 30_000;
    logger.info({ signal }, 'stopping: finishing running jobs');
    const timer = clock.setTimeout(() => {
      logger.error({ timeoutMs }, 'running jobs did not finish in time; exiting (their jobs will be picked up again)');
      process.exit(1);
    }, timeoutMs);
    sweep.stop();
    await handle.close();
    metricsServer?.close();
    clock.clearTimeout(timer);
    logger.info('worker stopped');
    logger.flush();
    return 0;
  },
};
