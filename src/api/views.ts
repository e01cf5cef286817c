// How batches and accounts look to API clients: progress, why nothing moves, share and ETA.
// Pure functions of stored state and `now`; the words come from presenters/line.ts, as in the CLI.
import { batchWaiting, estimateEta, waitingOf } from '../presenters/line.js';
import type { AccountLineState } from '../queue/accounts.js';
import type { BatchContext } from '../queue/batch-status.js';
import type { BatchInfo } from '../queue/batch/store.js';
import type { BatchView, HealthReply } from './schemas.js';

export { waitingOf };

export function batchLinks(id: string): { self: string; results: string } {
  const self = `/v1/batches/${encodeURIComponent(id)}`;
  return { self, results: `${self}/results` };
}

export function batchView(info: BatchInfo, context: BatchContext, now: number): BatchView {
  const c = info.counts;
  const finishedPlates = c.done + c.failed;
  const finished = info.finishedAt !== undefined;
  const percent = c.enqueued === 0 ? (info.sealed ? 100 : 0) : Math.floor((finishedPlates / c.enqueued) * 1000) / 10;
  const waiting = batchWaiting(info, context.line);
  const eta = estimateEta(info, context.line, context.perSecond, context.share, now);
  return {
    id: info.id,
    name: info.name,
    account: info.account,
    priority: info.priority,
    weight: info.weight,
    share: Math.round(context.share * 1000) / 1000,
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

export function lineView(line: AccountLineState): NonNullable<HealthReply['accounts']>[number] {
  const waiting = waitingOf(line);
  return {
    account: line.account,
    rateLimit: line.rateLimit,
    paused: line.paused,
    ...(waiting !== undefined ? { reason: waiting.message, waiting } : {}),
    ...(line.limitedUntil !== undefined ? { limitedUntil: new Date(line.limitedUntil).toISOString() } : {}),
  };
}
