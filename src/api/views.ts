// How batches and the line look to API clients: progress, why nothing moves, and a rough ETA.
// Pure functions of stored state, the configured rate and `now`.
import type { Config } from '../config.js';
import { describeLine } from '../commands/format.js';
import type { BatchInfo } from '../queue/batches.js';
import type { LineState } from '../queue/line.js';
import type { BatchView, HealthReply, Waiting } from './schemas.js';

/** Requests a plate costs before any has finished: one create and, usually, one poll. */
const DEFAULT_REQUESTS_PER_PLATE = 2;

export function batchLinks(id: string): { self: string; results: string } {
  const self = `/v1/batches/${encodeURIComponent(id)}`;
  return { self, results: `${self}/results` };
}

/** Why the line does not move (the same precedence as `vqb status`), or undefined when it does. */
export function waitingOf(line: LineState): Waiting | undefined {
  const message = describeLine(line);
  if (message === undefined) return undefined;
  if (line.paused || line.pause) return { reason: 'paused', ...(line.pause ? { code: line.pause.code } : {}), message };
  if (line.budgetUntil !== undefined) return { reason: 'budget', message, until: new Date(line.budgetUntil).toISOString() };
  return {
    reason: line.limitReason === 'quota' ? 'quota' : 'rate_limit',
    message,
    ...(line.limitedUntil !== undefined ? { until: new Date(line.limitedUntil).toISOString() } : {}),
  };
}

/** The line's reason first; then the batch's own spending cap. */
function batchWaiting(info: BatchInfo, line: LineState): Waiting | undefined {
  if (info.finishedAt !== undefined) return undefined;
  const waiting = waitingOf(line);
  if (waiting !== undefined || info.blocked !== 'budget') return waiting;
  return { reason: 'budget', message: `creates wait: the batch reached its cap of ${info.maxCreates ?? '?'} creates (raise it with \`vqb budget\`)` };
}

/**
 * Time left if this batch had the line to itself: remaining plates × requests per plate (as seen
 * so far in the batch) at the configured rate, after any wait imposed on the line (upstream limit,
 * key-wide spending cap). Undefined when finished, paused or held by the batch's own cap.
 */
export function estimateEta(
  info: BatchInfo,
  line: LineState,
  pacing: Pick<Config, 'rateLimit' | 'pacing' | 'pacingMargin'>,
  now: number,
): { seconds: number; at: string } | undefined {
  // Paused or held by a spending cap: no end in sight until someone acts.
  if (info.finishedAt !== undefined || line.paused || line.pause || info.blocked !== undefined) return undefined;
  const c = info.counts;
  const finished = c.done + c.failed;
  const remaining = Math.max(0, c.enqueued - finished);
  const perPlate = finished > 0 ? Math.max(1, (c.creates + c.polls) / finished) : DEFAULT_REQUESTS_PER_PLATE;
  const share = pacing.pacing === 'smooth' ? 1 - pacing.pacingMargin : 1;
  const perMs = (pacing.rateLimit.max / pacing.rateLimit.durationMs) * share;
  const waitMs = Math.max(0, (line.budgetUntil ?? now) - now, (line.limitedUntil ?? now) - now);
  const ms = waitMs + (remaining * perPlate) / perMs;
  return { seconds: Math.ceil(ms / 1000), at: new Date(now + ms).toISOString() };
}

export function batchView(info: BatchInfo, line: LineState, config: Pick<Config, 'rateLimit' | 'pacing' | 'pacingMargin'>, now: number): BatchView {
  const c = info.counts;
  const finishedPlates = c.done + c.failed;
  const finished = info.finishedAt !== undefined;
  const percent = c.enqueued === 0 ? (info.sealed ? 100 : 0) : Math.floor((finishedPlates / c.enqueued) * 1000) / 10;
  const waiting = batchWaiting(info, line);
  const eta = estimateEta(info, line, config, now);
  return {
    id: info.id,
    name: info.name,
    source: info.source,
    product: info.product,
    createdAt: new Date(info.createdAt).toISOString(),
    ...(info.finishedAt !== undefined ? { finishedAt: new Date(info.finishedAt).toISOString() } : {}),
    sealed: info.sealed,
    finished,
    metadata: info.metadata,
    extraColumns: info.extraColumns,
    counts: { ...c },
    progress: { percent, finished: finishedPlates, of: c.enqueued },
    ...(waiting ? { waiting } : {}),
    ...(eta ? { eta } : {}),
    links: batchLinks(info.id),
  };
}

export function lineView(line: LineState): NonNullable<HealthReply['line']> {
  const reason = describeLine(line);
  return {
    paused: line.paused,
    ...(reason !== undefined ? { reason } : {}),
    ...(line.limitedUntil !== undefined ? { limitedUntil: new Date(line.limitedUntil).toISOString() } : {}),
  };
}
