import type { Command } from '../cli.js';
import { withQueueServices } from '../queue/services.js';
import { describeBatch, describeLine } from './format.js';

export const statusCommand: Command = {
  summary: 'show the line (paused? why?), the queue, and batches',
  usage: 'vqb status [batch] [--json] [--limit N]',
  options: { json: { type: 'boolean' }, limit: { type: 'string' } },
  async run(ctx) {
    return withQueueServices(ctx.config(), async (services) => {
      const [batchId] = ctx.args;
      if (batchId) {
        const info = await services.batches.get(batchId);
        ctx.print(ctx.flags.json ? JSON.stringify(info, null, 2) : describeBatch(info));
        return 0;
      }
      const limit = Number.parseInt(String(ctx.flags.limit ?? '5'), 10) || 5;
      const [line, jobs, inflight, recent] = await Promise.all([
        services.line.state(),
        services.queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'failed'),
        services.inflight.count(),
        services.batches.list(0, limit),
      ]);
      if (ctx.flags.json) {
        ctx.print(JSON.stringify({ line, jobs, inflight, batches: recent }, null, 2));
        return 0;
      }
      ctx.print(`queue ${services.config.queueName}: ${describeLine(line) ?? 'running'}`);
      ctx.print(
        `  jobs: ${(jobs.prioritized ?? 0) + (jobs.waiting ?? 0)} waiting, ${jobs.delayed} between polls, ${jobs.active} active, ${jobs.failed} failed; ${inflight} queries in flight`,
      );
      ctx.print(`batches: ${recent.total}${recent.total > recent.batches.length ? ` (newest ${recent.batches.length})` : ''}`);
      for (const b of recent.batches) ctx.print(describeBatch(b));
      return 0;
    });
  },
};
