// `vqb run` on a terminal asks before a new batch that costs more than VQ_CONFIRM_ABOVE (issue 46):
// a file of 750k plates is R$ 260k, and nothing else stands between the Enter key and the bill.
// Without a terminal (scripts, cron, CI) nothing is asked and nothing changes; --yes skips it.
import { createInterface } from 'node:readline/promises';
import type { Account } from '../accounts/account.js';
import type { Config } from '../config.js';
import { costOf, formatMoney } from '../money.js';
import type { CostEstimate } from '../producers/dry-run.js';
import type { CommandContext } from './command.js';

/** What the question needs of the run: its terminal, its account and the creates it would send. */
export interface PaidRun {
  batchId: string;
  account: Account;
  /** The batch's own cap, when it has one: it sends no more than this. */
  maxCreates?: number;
}

/** True when stdin and stdout are a terminal: a person is there to answer. */
export function onTerminal(ctx: CommandContext): boolean {
  return ctx.io.stdin.isTTY === true && ctx.io.stdout.isTTY === true;
}

/**
 * The question to ask before the run, or undefined when none is due: at or under the threshold
 * (money when the account has a price, else creates), or VQ_CONFIRM_ABOVE=off.
 */
export function paidQuestion(config: Pick<Config, 'confirmAboveMicros'>, run: PaidRun, e: CostEstimate) {
  const threshold = config.confirmAboveMicros;
  if (threshold === undefined) return undefined;
  const creates = run.maxCreates !== undefined ? Math.min(e.creates, run.maxCreates) : e.creates;
  const price = run.account.price;
  const over = price ? creates * price.perQueryMicros > threshold : creates * 1e6 > threshold;
  if (!over) return undefined;
  const money = price ? ` (${formatMoney(costOf(price, creates))})` : '';
  const limit = price
    ? formatMoney({ amount: threshold / 1e6, currency: price.currency })
    : `${threshold / 1e6} creates`;
  return (
    `batch ${run.batchId} would send ${creates} paid creates${money} for account ${run.account.id}, ` +
    `above VQ_CONFIRM_ABOVE (${limit}). Go on? [y/N]`
  );
}

/** Asks on the terminal; yes (or pt-BR sim) goes on. */
export async function askYes(ctx: CommandContext, question: string): Promise<boolean> {
  const rl = createInterface({ input: ctx.io.stdin, output: ctx.io.stderr });
  try {
    return /^(y|yes|s|sim)$/i.test((await rl.question(`${question} `)).trim());
  } finally {
    rl.close();
  }
}
