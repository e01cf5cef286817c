import type { Command } from '../cli.js';
import { checkRedis, connectRedis } from '../queue/redis.js';
import { limiterFor, startWorker } from '../../workers/worker.js';

export const workCommand: Command = {
  summary: 'run workers only (start any number, on any number of machines; they share the limit)',
  usage: `vqb work [--concurrency N] [--shutdown-timeout 30s]
  Takes plate jobs from the queue until SIGTERM/SIGINT, then stops taking jobs, lets the running
  requests finish and their results persist, and exits.`,
  options: { 'shutdown-timeout': { type: 'string' } },
  async run(ctx) {
    const config = ctx.config();
    const logger = ctx.logger(config);
    const probe = connectRedis(config.redisUrl, { failFast: true });
    try {
      await checkRedis(probe, config.redisUrl);
    } finally {
      probe.disconnect();
    }
    const handle = startWorker(config, { logger });
    const limiter = limiterFor(config);
    logger.info({ queue: config.queueName, concurrency: config.concurrency, rateLimit: config.rateLimit.text, pacing: config.pacing, limiter }, 'worker started');
    const signal = await ctx.io.stopSignal;
    const timeoutMs = Number.parseInt(String(ctx.flags['shutdown-timeout'] ?? '30000'), 10) || 30_000;
    logger.info({ signal }, 'stopping: finishing running jobs');
    const timer = setTimeout(() => {
      logger.error({ timeoutMs }, 'running jobs did not finish in time; exiting (their jobs will be picked up again)');
      process.exit(1);
    }, timeoutMs);
    await handle.close();
    clearTimeout(timer);
    logger.info('worker stopped');
    logger.flush();
    return 0;
  },
};
