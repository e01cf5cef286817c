import { clock } from '../clock.js';
import { describeLine } from '../presenters/text.js';
import { withQueueServices } from '../services.js';
import { printable } from '../upstream/bounds.js';
import type { Command } from './command.js';

const ACCOUNT_OPTION = { account: { type: 'string' as const }, json: { type: 'boolean' as const } };

export const pauseCommand: Command = {
  usage: 'vqb pause [--account A] [--reason TEXT] [--json]',
  options: { ...ACCOUNT_OPTION, reason: { type: 'string' } },
  async run(ctx) {
    return withQueueServices(ctx.config(), async (services) => {
      const lines = services.accounts
        .pick(typeof ctx.flags.account === 'string' ? ctx.flags.account : undefined)
        .map((a) => a.line);
      const reason = typeof ctx.flags.reason === 'string' ? ctx.flags.reason : 'paused by an operator (vqb pause)';
      for (const line of lines) await line.pauseByOperator(reason);
      const states = await Promise.all(lines.map((l) => l.state()));
      if (ctx.flags.json) ctx.print(JSON.stringify({ accounts: states }));
      else
        for (const s of states)
          ctx.print(
            `paused account ${s.account}; run ` +
              `\`vqb resume${lines.length === 1 && s.account !== 'default' ? ` --account ${s.account}` : ''}\` ` +
              'to continue',
          );
      return 0;
    });
  },
};

export const resumeCommand: Command = {
  usage: 'vqb resume [--account A] [--json]',
  options: ACCOUNT_OPTION,
  async run(ctx) {
    return withQueueServices(ctx.config(), async (services) => {
      const lines = services.accounts
        .pick(typeof ctx.flags.account === 'string' ? ctx.flags.account : undefined)
        .map((a) => a.line);
      const before = await Promise.all(lines.map((l) => l.state()));
      // A hold the upstream asked for goes too: whatever it stored, the operator can lift it.
      const held = new Set<string>();
      for (const line of lines) {
        if (await line.releaseHold()) held.add(line.account.id);
        await services.webhooks.accountResumed(line.account.id, await line.resume());
      }
      const after = await Promise.all(lines.map((l) => l.state()));
      if (ctx.flags.json) ctx.print(JSON.stringify({ accounts: after, was: before }));
      else
        for (const b of before)
          ctx.print(
            printable(
              b.pause || b.paused
                ? `resumed account ${b.account}` +
                    `${b.pause ? ` (was ${describeLine(b, clock.now(), services.config.timeZone)})` : ''}`
                : held.has(b.account)
                  ? `resumed account ${b.account} (the upstream's wait is lifted)`
                  : `account ${b.account} was not paused; nothing to resume`,
            ),
          );
      return 0;
    });
  },
};
