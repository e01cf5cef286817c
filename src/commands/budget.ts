// Spending caps and the cost report.

import { UsageError } from '../errors.js';
import { costOf, createsCap, formatMoney, type Money, type Price, spendOf } from '../money.js';
import { goOnText } from '../presenters/text.js';
import { releaseAccountHold, releaseBatchHold } from '../queue/holds.js';
import { withQueueServices } from '../services.js';
import { batchIdArg } from './batch.js';
import type { Command } from './command.js';
import { spendFlag } from './run.js';

/** A price as JSON shows it: amounts in the currency's unit. */
function priceView(price: Price): { perQuery: number; perPoll: number; currency: string } {
  return { perQuery: price.perQueryMicros / 1e6, perPoll: price.perPollMicros / 1e6, currency: price.currency };
}

/** `N` → N, `none` → null (remove the cap), absent → undefined (leave it). */
function capFlag(value: unknown, flag: string): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'none') return null;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${flag} takes a whole number or "none"`);
  return n;
}

export const budgetCommand: Command = {
  usage: `vqb budget [batch] [--account A] [--max-creates N|none] [--max-spend X]
                  [--per-day N|none] [--per-month N|none] [--json]
  --max-spend X: the batch's cap in money (the account's currency), as X ÷ the price per query
  creates (needs VQ_PRICE_PER_QUERY or the account's pricePerQuery); with --max-creates the smaller.
  With no change, shows the account's caps and what it spent today and this month (UTC).
  A batch at its cap, or an account at its daily/monthly cap, keeps its place and waits; raising
  the cap here puts the held plates back to work at once. Nothing ever fails for a cap.`,
  options: {
    account: { type: 'string' },
    'max-creates': { type: 'string' },
    'max-spend': { type: 'string' },
    'per-day': { type: 'string' },
    'per-month': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(ctx) {
    const config = ctx.config();
    return withQueueServices(config, async (services) => {
      const { budget } = services;
      const [batchId] = ctx.args;
      const batchInfo = batchId ? await services.batchViews.get(batchIdArg(batchId)) : undefined;
      const account = services.accounts.for(
        typeof ctx.flags.account === 'string' ? ctx.flags.account : batchInfo?.account,
      ).id;
      const price = services.accounts.for(account).account.price;
      const maxSpend = spendFlag(ctx.flags['max-spend']);
      const maxCreatesFlag = capFlag(ctx.flags['max-creates'], 'max-creates');
      // A cap in money is a cap in creates at the price in force (NO_PRICE without one).
      const maxCreates =
        maxSpend === undefined
          ? maxCreatesFlag
          : createsCap({ maxCreates: maxCreatesFlag ?? undefined, maxSpend }, price, account);
      const perDay = capFlag(ctx.flags['per-day'], 'per-day');
      const perMonth = capFlag(ctx.flags['per-month'], 'per-month');
      if (maxCreates !== undefined) {
        if (!batchId)
          throw new UsageError(`--${maxSpend === undefined ? 'max-creates' : 'max-spend'} needs a batch id`);
        await budget.setMaxCreates(await services.batches.ref(batchId), maxCreates);
        // Counted before the hold is let go: what the raise lets go on, not what a worker already
        // sent in the moment after (the words would say one create fewer on a fast key).
        const after = await services.batchViews.get(batchId);
        await releaseBatchHold(services, batchId);
        const spend =
          maxSpend !== undefined && maxCreates !== null
            ? ` (${formatMoney(costOf(price!, maxCreates))} at ${formatMoney(costOf(price!, 1))} per query)`
            : '';
        if (!ctx.flags.json)
          ctx.print(`batch ${batchId}: create cap ${maxCreates ?? 'removed'}${spend}${goOnText(after)}`);
      }
      if (perDay !== undefined || perMonth !== undefined) {
        await budget.setCaps(account, {
          ...(perDay !== undefined ? { perDay } : {}),
          ...(perMonth !== undefined ? { perMonth } : {}),
        });
        const woken = await releaseAccountHold(services, account);
        if (!ctx.flags.json)
          ctx.print(`account ${account}: caps set${woken ? `; ${woken} waiting creates go on` : ''}`);
      }
      const [caps, spent, sent, batch] = await Promise.all([
        budget.caps(account),
        budget.spent(account),
        services.costs.sentBy(account),
        batchId ? services.batchViews.get(batchId) : undefined,
      ]);
      const money = (creates: number) => (price ? costOf(price, creates) : undefined);
      // Spend is what left and may be billed (the cost ledger, as `vqb cost` reads it); `spent` is
      // what the caps counted, which leaves out the hand-confirmed `vqb check --create`.
      const billed = (c: { createsSent: number; pollsSent: number }) =>
        price ? costOf(price, c.createsSent, c.pollsSent) : undefined;
      const report = {
        account,
        caps,
        spent,
        sent: { today: sent.today.createsSent, thisMonth: sent.thisMonth.createsSent },
        ...(price
          ? {
              spentMoney: { today: billed(sent.today), thisMonth: billed(sent.thisMonth) },
              price: priceView(price),
            }
          : {}),
        ...(batch
          ? {
              batch: {
                id: batch.id,
                maxCreates: batch.maxCreates ?? null,
                ...(price && batch.maxCreates !== undefined ? { maxSpend: money(batch.maxCreates) } : {}),
                creates: batch.counts.creates,
                blocked: batch.blocked ?? null,
              },
            }
          : {}),
      };
      if (ctx.flags.json) ctx.print(JSON.stringify(report));
      else {
        ctx.print(
          `account ${account}: creates sent today ${sent.today.createsSent}, this month ` +
            `${sent.thisMonth.createsSent} (as \`vqb cost\` counts them)`,
        );
        if (price)
          ctx.print(
            `  spent today ${formatMoney(billed(sent.today)!)}, this month ` +
              `${formatMoney(billed(sent.thisMonth)!)} (${formatMoney(costOf(price, 1))} per query)`,
          );
        const dayCap = caps.perDay !== undefined ? ` of ${caps.perDay}` : ' (no daily cap)';
        const monthCap = caps.perMonth !== undefined ? ` of ${caps.perMonth}` : ' (no monthly cap)';
        ctx.print(
          `  caps: today ${spent.today}${dayCap}, this month ${spent.thisMonth}${monthCap}` +
            (sent.today.createsSent > spent.today ? ' (a `vqb check --create` is not held by the caps)' : ''),
        );
        if (batch) {
          const cap =
            batch.maxCreates === undefined
              ? ''
              : ` of at most ${batch.maxCreates}${price ? ` (${formatMoney(costOf(price, batch.maxCreates))})` : ''}`;
          ctx.print(
            `batch ${batch.id}: ${batch.counts.creates} ` +
              `creates${price ? ` (${formatMoney(costOf(price, batch.counts.createsSent))})` : ''}${cap}` +
              (batch.blocked ? ' — waiting at its cap' : ''),
          );
        }
      }
      return 0;
    });
  },
};

/** --days: how many UTC days back, today included (7 when absent). */
export function daysFlag(value: unknown): number {
  if (value === undefined) return 7;
  const n = Number(value);
  if (!/^\d+$/.test(String(value)) || n < 1 || n > 400)
    throw new UsageError(`--days takes a whole number of days from 1 to 400; got ${JSON.stringify(String(value))}`);
  return n;
}

/** `R$ 12,25`, several currencies joined with `+`; `-` for nothing spent yet. */
export function spendText(spend: readonly Money[]): string {
  return spend.length === 0 ? formatMoney({ amount: 0, currency: 'BRL' }) : spend.map(formatMoney).join(' + ');
}

/** `20261124` (the key's form) as `2026-11-24`. */
function dayText(day: string): string {
  return /^\d{8}$/.test(day) ? `${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6)}` : day;
}

export const costCommand: Command = {
  usage: 'vqb cost [--days 7] [--json]   (per batch: vqb status <batch>)',
  options: { days: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    return withQueueServices(ctx.config(), async (services) => {
      const days = daysFlag(ctx.flags.days);
      const accounts = services.config.accounts;
      const priced = accounts.some((a) => a.price !== undefined);
      // What left and may be billed, at each account's price (docs/accounts.md#money).
      const report = (await services.costs.days(days)).map(({ day, counts, byAccount }) => ({
        day,
        counts,
        ...(priced
          ? {
              spend: spendOf(accounts, (id) => {
                const c = byAccount[id];
                return c && { creates: c.createsSent, polls: c.pollsSent };
              }),
            }
          : {}),
      }));
      if (ctx.flags.json) {
        ctx.print(JSON.stringify(report));
        return 0;
      }
      // Sent: every request that left and may be billed, whatever came back (what the upstream's
      // invoice counts); answered: those we read.
      ctx.print(
        `day         creates-sent  answered  polls-sent  answered   429s  reused  possible-dup  ` +
          `requests/plate${priced ? '  spend' : ''}`,
      );
      for (const { day, counts: c, spend } of report) {
        const perPlate =
          c.creates + c.reused > 0 ? ((c.createsSent + c.pollsSent) / (c.creates + c.reused)).toFixed(2) : '-';
        const cells = [
          [c.createsSent, 12],
          [c.creates, 8],
          [c.pollsSent, 10],
          [c.polls, 8],
          [c.rateLimited, 5],
          [c.reused, 6],
          [c.possibleDuplicates, 12],
        ] as const;
        ctx.print(
          `${dayText(day)}  ${cells.map(([n, w]) => String(n).padStart(w)).join('  ')}  ` +
            `${perPlate.padStart(14)}${spend ? `  ${spendText(spend)}` : ''}`,
        );
      }
      return 0;
    });
  },
};
