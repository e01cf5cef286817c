import type { Command } from '../cli.js';
import { withQueueServices } from '../queue/services.js';
import { describeLine } from './format.js';

export const pauseCommand: Command = {
  summary: 'pause every worker (running requests finish; nothing is lost)',
  usage: 'vqb pause [--reason TEXT] [--json]',
  options: { reason: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    return withQueueServices(ctx.config(), async (services) => {
      await services.line.pause(typeof ctx.flags.reason === 'string' ? ctx.flags.reason : 'paused by an operator (vqb pause)');
      if (ctx.flags.json) ctx.print(JSON.stringify({ queue: services.config.queueName, line: await services.line.state() }));
      else ctx.print(`paused queue ${services.config.queueName}; run \`vqb resume\` to continue`);
      return 0;
    });
  },
};

export const resumeCommand: Command = {
  summary: 'resume after a pause or a key failure (rotate the key first)',
  usage: 'vqb resume [--json]',
  options: { json: { type: 'boolean' } },
  async run(ctx) {
    return withQueueServices(ctx.config(), async (services) => {
      const before = await services.line.state();
      await services.line.resume();
      if (ctx.flags.json) ctx.print(JSON.stringify({ queue: services.config.queueName, was: before, line: await services.line.state() }));
      else ctx.print(`resumed queue ${services.config.queueName}${before.pause ? ` (was ${describeLine(before)})` : ''}`);
      return 0;
    });
  },
};
