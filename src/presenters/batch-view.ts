// A batch as every front door shows it (src/schemas/batch.ts): the HTTP API's batch, the library's
// `batch.progress()` and `vqb status <batch> --json` are this one object. A pure function of the
// stored batch, what its status reads beyond it (its account's line, its share) and `now`.

import { batchCost } from '../money.js';
import { deadlineView } from '../plans/deadline.js';
import type { DeadlinePlan } from '../plans/projection.js';
import type { BatchInfo } from '../queue/batch/store.js';
import type { BatchView, WebhookDelivery } from '../schemas/batch.js';
import type { ArchiveManifest } from '../sinks/archive.js';
import { type DeliveryRecord, deliveryFailure } from '../webhooks/deliveries.js';
import type { BatchContext } from './batch-context.js';
import { batchWaiting, estimateEta, rateView } from './line.js';

/** Where the HTTP API serves a batch and its results. */
export function batchLinks(id: string): BatchView['links'] {
  const self = `/v1/batches/${encodeURIComponent(id)}`;
  return { self, results: `${self}/results` };
}

const iso = (ms: number | undefined) => (ms !== undefined ? new Date(ms).toISOString() : undefined);

function deliveryView(d: DeliveryRecord): WebhookDelivery {
  const lastAttemptAt = iso(d.lastAttemptAt);
  const deliveredAt = iso(d.deliveredAt);
  return {
    id: d.id,
    event: d.event,
    url: d.url,
    state: d.state,
    attempts: d.attempts,
    ...(d.lastStatus !== undefined ? { lastStatus: d.lastStatus } : {}),
    // A category only: a record from before categories held the socket's words (issue #35).
    ...(d.lastError !== undefined ? { lastError: deliveryFailure(d.lastError) } : {}),
    ...(lastAttemptAt ? { lastAttemptAt } : {}),
    ...(deliveredAt ? { deliveredAt } : {}),
    createdAt: new Date(d.createdAt).toISOString(),
  };
}

export function batchView(info: BatchInfo, context: BatchContext, now: number): BatchView {
  const c = info.counts;
  const finishedPlates = c.done + c.failed;
  const percent = c.enqueued === 0 ? (info.sealed ? 100 : 0) : Math.floor((finishedPlates / c.enqueued) * 1000) / 10;
  const waiting = batchWaiting(info, context.line, now, context.timeZone);
  const eta = estimateEta(info, context.line, context.perSecond, context.share, now);
  return {
    id: info.id,
    name: info.name,
    account: info.account,
    priority: info.priority,
    weight: info.weight,
    share: Math.round(context.share * 1000) / 1000,
    ...(context.line.rate ? { rate: rateView(context.line.rate, now) } : {}),
    source: info.source,
    product: info.product,
    createdAt: new Date(info.createdAt).toISOString(),
    ...(info.finishedAt !== undefined ? { finishedAt: new Date(info.finishedAt).toISOString() } : {}),
    sealed: info.sealed,
    finished: info.finishedAt !== undefined,
    state: info.finishedAt !== undefined ? 'finished' : 'running',
    metadata: info.metadata,
    extraColumns: info.extraColumns,
    ...(info.maxCreates !== undefined ? { maxCreates: info.maxCreates } : {}),
    counts: { ...c },
    ...(context.price ? { cost: batchCost(context.price, c, info.maxCreates, info.reported) } : {}),
    progress: { percent, finished: finishedPlates, of: c.enqueued },
    ...(waiting ? { waiting } : {}),
    ...(context.stranded ? { waitingForKeys: context.stranded } : {}),
    ...(context.plan ? { deadline: deadlineStatus(context.plan, info, now, context.timeZone) } : {}),
    ...(eta ? { eta } : {}),
    ...(info.callbackUrl !== undefined
      ? { callbackUrl: info.callbackUrl, webhooks: (context.webhooks ?? []).map(deliveryView) }
      : {}),
    links: batchLinks(info.id),
  };
}

/** The batch's deadline as it runs: the judgement now, and whether (and since when) it is at risk. */
function deadlineStatus(
  plan: DeadlinePlan,
  info: BatchInfo,
  now: number,
  zone: string | undefined,
): NonNullable<BatchView['deadline']> {
  return {
    ...deadlineView(plan.verdict, now, zone),
    atRisk: plan.atRisk,
    ...(info.atRiskSince !== undefined ? { atRiskSince: new Date(info.atRiskSince).toISOString() } : {}),
  };
}

/** An archived batch, from its manifest: the batch as it was when archived, nothing waiting, no share. */
export function archivedBatchView(manifest: ArchiveManifest, now: number): BatchView {
  const line = { account: manifest.batch.account, paused: false, rateLimit: '' };
  const context = { line, share: 0, perSecond: 0, ...(manifest.webhooks ? { webhooks: manifest.webhooks } : {}) };
  return {
    ...batchView(manifest.batch, context, now),
    state: 'archived',
    archivedAt: new Date(manifest.archivedAt).toISOString(),
  };
}
