// Short, readable renderings for a terminal (status, run's progress line, retry).
import { clock } from '../clock.js';
import { batchCost, formatMoney, type Price } from '../money.js';
import type { BatchInfo } from '../queue/batch/store.js';
import { spanText, whenText } from '../time-text.js';
import { batchCapWaiting } from './line.js';

export { describeLine } from './line.js';

/** A duration for a terminal line (one rule for the whole CLI: src/time-text.ts). */
export const duration = spanText;

/** "1 plate", "2 plates": a count and its noun (`many` when the plural is not noun + "s"). */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

export function describeCounts(b: BatchInfo): string {
  const c = b.counts;
  const parts = [
    `${c.done + c.failed}/${c.enqueued} finished`,
    `${c.done} done`,
    `${c.failed - (c.cancelled ?? 0)} failed`,
    ...(c.cancelled ? [`${c.cancelled} cancelled (never sent, not charged)`] : []),
    `${c.inflight} in flight`,
    `${c.queued} queued`,
  ];
  if (c.rejected) parts.push(`${c.rejected} rejected`);
  if (c.duplicates) parts.push(counted(c.duplicates, 'duplicate'));
  if (c.possibleDuplicates) parts.push(counted(c.possibleDuplicates, 'possible duplicate charge'));
  if (c.reused) parts.push(`${c.reused} reused`);
  return parts.join(', ');
}

/** `  spend: R$ 2,80 of at most R$ 2,80 (R$ 0,35 per query)`, and what the upstream said of its price. */
export function describeSpend(b: BatchInfo, price: Price): string {
  const cost = batchCost(price, b.counts, b.maxCreates, b.reported);
  const cap = cost.maxSpend !== undefined ? ` of at most ${formatMoney({ ...cost, amount: cost.maxSpend })}` : '';
  const r = cost.reported;
  const said = r
    ? `; the upstream's answers said ${formatMoney({ ...cost, amount: r.amount })} (${r.answers} ` +
      `answers, ${r.billed} billed, ${r.notBilled} not billed)`
    : '';
  const perPoll = cost.perPoll > 0 ? `, ${formatMoney({ ...cost, amount: cost.perPoll })} per poll` : '';
  return (
    `  spend: ${formatMoney(cost)}${cap} (${formatMoney({ ...cost, amount: cost.perQuery })} ` +
    `per query${perPoll})${said}`
  );
}

/** How a batch is said: the clock its instants are on, and whether anything moves it now. */
export interface BatchWords {
  /** VQ_TIME_ZONE: its instants on that clock, the zone named (UTC when absent). */
  zone?: string;
  /**
   * Its account moves nothing now (paused, held, or no worker runs it): a batch with plates left
   * is `waiting`, not `running`, and its account's line (beside it) says why.
   */
  stopped?: boolean;
}

/** A batch in a few lines. */
export function describeBatch(b: BatchInfo, now = clock.now(), price?: Price, words: BatchWords = {}): string {
  const cancelled = b.counts.cancelled ? 'cancelled, ' : '';
  const state =
    b.finishedAt !== undefined
      ? `${cancelled}finished ${whenText(b.finishedAt, now, words.zone)}`
      : b.sealed
        ? `${cancelled}${words.stopped ? 'waiting' : 'running'}`
        : 'ingesting';
  const c = b.counts;
  const perPlate = c.done + c.failed > 0 ? ((c.creates + c.polls) / (c.done + c.failed)).toFixed(2) : '-';
  const lines = [
    `batch ${b.id} (${b.source}: ` +
      b.name +
      (b.account !== 'default' ? `; account ${b.account}` : '') +
      (b.priority !== 'normal' ? `; ${b.priority}` : '') +
      (b.weight !== 1 ? `; weight ${b.weight}` : '') +
      `) — ${state}`,
    `  ${describeCounts(b)}`,
    `  cost: ${c.createsSent ?? c.creates} creates sent (${c.creates} answered), ` +
      `${c.pollsSent ?? c.polls} polls sent (${c.polls} answered), ${c.rateLimited} answered 429, ` +
      `${c.reused} reused, ${c.possibleDuplicates} possible duplicate charges; ${perPlate} requests per finished plate`,
  ];
  if (price) lines.push(describeSpend(b, price));
  const capped = batchCapWaiting(b, now, words.zone, price !== undefined);
  if (capped) lines.push(`  ${capped.message}`);
  return lines.join('\n');
}

/**
 * What a raised (or removed) cap lets go on, counted from the batch itself: its queued plates up
 * to the creates the cap still allows. The jobs woken from `delayed` are only the few that were on
 * the queue; the rest of the batch waits in the scheduler and goes on just the same.
 */
export function goOnText(batch: BatchInfo): string {
  const queued = batch.counts.queued;
  if (batch.finishedAt !== undefined || queued === 0) return '';
  const sent = batch.counts.createsSent ?? batch.counts.creates;
  const room = batch.maxCreates === undefined ? queued : Math.max(0, batch.maxCreates - sent);
  if (room === 0) return `; ${counted(queued, 'queued plate')} still wait: the cap allows no more creates`;
  const going = Math.min(room, queued);
  return going === queued
    ? `; ${counted(queued, 'queued plate')} go${queued === 1 ? 'es' : ''} on`
    : `; ${going} of ${counted(queued, 'queued plate')} go on (the cap allows ${counted(room, 'more create')})`;
}
