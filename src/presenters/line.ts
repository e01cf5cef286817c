// Why an account's line is not moving, as the facts a client reads (reason, code, since, until)
// and the English `message` that `vqb status`, `vqb pause`/`resume`, the progress line, the HTTP
// API and the library show. The words are not written here: the message is presenters/waits.ts's
// waitingText, the presenter the console reads in its own language, so the CLI's English and the
// console's are one wording from one catalogue (words.ts; issue 45). Pure functions of the stored
// state.

import type { RedisWaitReason } from '../accounts/wait.js';
import { clock } from '../clock.js';
import type { BatchInfo } from '../queue/batch/store.js';
import type { AccountLineState, LineRate } from '../queue/line.js';
import type { RateInForce, Waiting } from '../schemas/batch.js';
import { relativeText } from '../time-text.js';
import { recoveryText, terminalWords, type WaitBatch, type WaitFacts, waitingText } from './waits.js';

export type { Waiting };

/** The facts worded for the CLI and the API: English, instants on the clock of `zone`, named. */
function worded(
  facts: WaitFacts,
  line: AccountLineState | undefined,
  now: number,
  zone?: string,
  batch?: WaitBatch,
): Waiting {
  const { reason, code, until, since } = facts;
  const message = waitingText(terminalWords(zone), facts, line, now, batch);
  return {
    reason,
    ...(code !== undefined ? { code } : {}),
    message,
    ...(until !== undefined ? { until } : {}),
    ...(since !== undefined ? { since } : {}),
  };
}

/** Why nothing (or less) is moving on the account, before any words; undefined when all is well. */
function waitFacts(state: AccountLineState, redis?: RedisWaitReason): WaitFacts | undefined {
  // This process cannot store (RedisHealth.waitReason): nothing moves until Redis takes writes again.
  if (redis !== undefined) return { reason: redis };
  if (state.pause) return { reason: 'paused', code: state.pause.code };
  if (state.paused) return { reason: 'paused' };
  if (state.unreachable)
    return { reason: 'upstream_unreachable', since: new Date(state.unreachable.since).toISOString() };
  if (state.budgetUntil !== undefined) return { reason: 'budget', until: new Date(state.budgetUntil).toISOString() };
  if (state.limitedUntil !== undefined)
    return {
      reason: state.limitReason === 'quota' ? 'quota' : 'rate_limit',
      until: new Date(state.limitedUntil).toISOString(),
    };
  return undefined;
}

/**
 * Why nothing (or less) is moving on the account, in words an operator can act on; undefined when
 * all is well. Instants in the words are on the clock of `zone` (VQ_TIME_ZONE), named; the fields
 * (`since`, `until`) stay ISO 8601.
 */
export function waitingOf(
  state: AccountLineState,
  redis?: RedisWaitReason,
  now = clock.now(),
  zone?: string,
): Waiting | undefined {
  const facts = waitFacts(state, redis);
  return facts === undefined ? undefined : worded(facts, state, now, zone);
}

/** `300/min`, `20/s`, `2.5/s`: a rate as a person reads it, in the window it was announced in when there is one. */
export function rateText(perSecond: number, windowMs?: number): string {
  if (windowMs === 60_000) return `${Math.round(perSecond * 60)}/min`;
  if (windowMs === 3_600_000) return `${Math.round(perSecond * 3_600)}/h`;
  if (perSecond >= 10) return `${Math.round(perSecond)}/s`;
  if (perSecond >= 1) return `${Math.round(perSecond * 10) / 10}/s`;
  return `${Math.round(perSecond * 60 * 10) / 10}/min`;
}

const ago = (ms: number): string => relativeText(0, Math.max(ms, 1_500));

/**
 * The rate in force and how sure it is, for status lines: "300/min, announced by the upstream",
 * "19/s, learned from 429s (last 429 3 min ago, last probe 40 s ago)", "1/s, learning (nothing
 * heard yet)", "60/min, configured".
 */
export function describeRate(rate: LineRate, now: number): string {
  const value = rateText(rate.perSecond, rate.windowMs);
  const ceiling = rate.ceilingPerSecond !== undefined ? `; at most ${rateText(rate.ceilingPerSecond)}` : '';
  switch (rate.source) {
    case 'configured':
      return `${value}, configured`;
    case 'announced':
      return `${value}, announced by the upstream (its rate-limit headers)${ceiling}`;
    case 'start':
      return `${value}, learning: starting low until the upstream says more${ceiling}`;
    case 'learned': {
      const when = [
        rate.last429At !== undefined ? `last 429 ${ago(now - rate.last429At)}` : undefined,
        rate.lastProbeAt !== undefined ? `last probe ${ago(now - rate.lastProbeAt)}` : undefined,
      ]
        .filter(Boolean)
        .join(', ');
      return `${value}, learned from 429s${when ? ` (${when})` : ''}${ceiling}`;
    }
  }
}

/** The rate in force as API clients and the console see it. */
export function rateView(rate: LineRate, now: number): RateInForce {
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    perSecond: Math.round(rate.perSecond * 1000) / 1000,
    source: rate.source,
    text: describeRate(rate, now),
    ...(rate.limit !== undefined ? { limit: rate.limit } : {}),
    ...(rate.windowMs !== undefined ? { windowMs: rate.windowMs } : {}),
    ...(rate.ceilingPerSecond !== undefined ? { ceilingPerSecond: rate.ceilingPerSecond } : {}),
    ...(rate.last429At !== undefined ? { last429At: iso(rate.last429At) } : {}),
    ...(rate.lastProbeAt !== undefined ? { lastProbeAt: iso(rate.lastProbeAt) } : {}),
  };
}

export function describeLine(state: AccountLineState, now = clock.now(), zone?: string): string | undefined {
  return waitingOf(state, undefined, now, zone)?.message;
}

/**
 * "upstream reachable again since 2026-11-24 14:05 UTC (3 min ago; it was unreachable 3 min:
 * connection refused)", for a while after an outage; on the clock of `zone` when one is given.
 */
export function describeRecovery(state: AccountLineState, now = clock.now(), zone?: string): string | undefined {
  return recoveryText(terminalWords(zone), state, now);
}

/** The batch held at its own spending cap (no end time: until someone raises it); undefined otherwise. */
export function batchCapWaiting(info: BatchInfo, now: number, zone?: string, priced?: boolean): Waiting | undefined {
  if (info.finishedAt !== undefined || info.blocked !== 'budget') return undefined;
  return worded({ reason: 'budget' }, undefined, now, zone, { id: info.id, maxCreates: info.maxCreates, priced });
}

/** The account's reason first; then the batch's own spending cap. Undefined for a finished batch. */
export function batchWaiting(info: BatchInfo, line: AccountLineState, now: number, zone?: string): Waiting | undefined {
  if (info.finishedAt !== undefined) return undefined;
  return waitingOf(line, undefined, now, zone) ?? batchCapWaiting(info, now, zone);
}

/** Requests a plate costs before any has finished: one create and, usually, one poll. */
const DEFAULT_REQUESTS_PER_PLATE = 2;

/**
 * Time left: the batch's remaining plates × requests per plate (as seen so far in the batch), at
 * its share of the account's rate, after any wait imposed on the account. Undefined when
 * finished, paused or held by a cap (no end in sight until someone acts).
 */
export function estimateEta(
  info: BatchInfo,
  line: AccountLineState,
  perSecond: number,
  share: number,
  now: number,
): { seconds: number; at: string } | undefined {
  if (info.finishedAt !== undefined || line.paused || line.pause || info.blocked !== undefined) return undefined;
  const c = info.counts;
  const finished = c.done + c.failed;
  const remaining = Math.max(0, c.enqueued - finished);
  const perPlate = finished > 0 ? Math.max(1, (c.creates + c.polls) / finished) : DEFAULT_REQUESTS_PER_PLATE;
  // A batch with no creates waiting (share 0) only has polls left: they go at the account's rate.
  const perMs = (perSecond / 1_000) * (share > 0 ? share : 1);
  const waitMs = Math.max(0, (line.budgetUntil ?? now) - now, (line.limitedUntil ?? now) - now);
  const ms = waitMs + (remaining * perPlate) / perMs;
  return { seconds: Math.ceil(ms / 1000), at: new Date(now + ms).toISOString() };
}
