// The events vqb sends, in the Standard Webhooks payload shape `{type, timestamp, data}`, and
// their message ids. An id is derived from what the event is (the batch and when it finished; the
// account and when it was paused) and where it goes, so two workers that both notice the same
// event make the same delivery job, and the second is a no-op.
import { createHash } from 'node:crypto';
import type { BatchInfo, StoredCounts } from '../queue/batch/store.js';
import type { AccountPause } from '../queue/line.js';
import { spanText } from '../time-text.js';

export type WebhookEventType =
  | 'batch.finished'
  | 'account.paused'
  | 'account.resumed'
  | 'batch.at_risk'
  | 'batch.back_on_track'
  | 'plate.changed'
  | 'watch.round_finished';

/** The watch lists' events (src/watch/rounds.ts builds their data). */
export type WatchEventType = 'plate.changed' | 'watch.round_finished';

/** batch.at_risk (its projected finish passed its deadline) and batch.back_on_track (it is in time again). */
export interface BatchDeadlineData {
  batchId: string;
  name: string;
  account: string;
  metadata: Record<string, unknown>;
  deadline: string;
  /** The projected finish (expected) and its range, when a rate is known. */
  projectedFinish?: string;
  eta?: { from: string; to: string };
  /** The deadline less the projected finish, seconds (negative: late by). */
  slackSeconds?: number;
  counts: StoredCounts;
  links: { self: string; results: string };
  summary: string;
}

export interface BatchFinishedData {
  batchId: string;
  name: string;
  account: string;
  source: string;
  metadata: Record<string, unknown>;
  createdAt: string;
  finishedAt: string;
  counts: StoredCounts;
  links: { self: string; results: string };
  /** One sentence for a person (a chat message, an e-mail subject): durations in words. */
  summary: string;
}

export interface AccountPausedData {
  account: string;
  code: string;
  /** What happened and what to do (the advice `vqb status` shows). */
  message: string;
  pausedAt: string;
  /** account.resumed: when the pause was lifted. */
  resumedAt?: string;
  /** The batch this delivery is for (its callbackUrl), when it is for one. */
  batchId?: string;
  links?: { self: string; results: string };
  /** One sentence for a person; account.resumed says how long the pause lasted. */
  summary: string;
}

export interface WebhookEvent<T extends WebhookEventType = WebhookEventType> {
  type: T;
  timestamp: string;
  data: T extends 'batch.finished'
    ? BatchFinishedData
    : T extends WatchEventType
      ? Record<string, unknown>
      : T extends 'batch.at_risk' | 'batch.back_on_track'
        ? BatchDeadlineData
        : AccountPausedData;
}

/** batch.at_risk or batch.back_on_track, at `at`, from the deadline watch's projection. */
export function batchDeadlineEvent(
  type: 'batch.at_risk' | 'batch.back_on_track',
  info: BatchInfo & { deadline: number },
  projection: { expected?: number; low?: number; high?: number; slackMs?: number },
  at: number,
  publicUrl: string | undefined,
): WebhookEvent<'batch.at_risk' | 'batch.back_on_track'> {
  const iso = (ms: number) => new Date(ms).toISOString();
  const slack = projection.slackMs;
  const how =
    slack === undefined ? '' : slack >= 0 ? `: on time by ${spanText(slack)}` : `: late by ${spanText(-slack)}`;
  return {
    type,
    timestamp: iso(at),
    data: {
      batchId: info.id,
      name: info.name,
      account: info.account,
      metadata: info.metadata,
      deadline: iso(info.deadline),
      ...(projection.expected !== undefined ? { projectedFinish: iso(projection.expected) } : {}),
      ...(projection.low !== undefined && projection.high !== undefined
        ? { eta: { from: iso(projection.low), to: iso(projection.high) } }
        : {}),
      ...(slack !== undefined ? { slackSeconds: Math.round(slack / 1000) } : {}),
      counts: { ...info.counts },
      links: publicLinks(info.id, publicUrl),
      summary:
        `batch ${info.id} ` +
        `${type === 'batch.at_risk' ? 'is at risk of missing' : 'is back on track for'} its deadline${how}`,
    },
  };
}

/** `msg_` + 32 hex of sha256 over the event's identity and its target: stable, unique enough. */
export function messageId(...parts: string[]): string {
  return `msg_${createHash('sha256').update(parts.join('\u0000')).digest('hex').slice(0, 32)}`;
}

/** The batch's links, absolute when a public base URL is configured (VQ_PUBLIC_URL). */
export function publicLinks(batchId: string, publicUrl: string | undefined): { self: string; results: string } {
  const self = `${publicUrl ?? ''}/v1/batches/${encodeURIComponent(batchId)}`;
  return { self, results: `${self}/results` };
}

export function batchFinishedEvent(
  info: BatchInfo & { finishedAt: number },
  publicUrl: string | undefined,
): WebhookEvent<'batch.finished'> {
  return {
    type: 'batch.finished',
    timestamp: new Date(info.finishedAt).toISOString(),
    data: {
      batchId: info.id,
      name: info.name,
      account: info.account,
      source: info.source,
      metadata: info.metadata,
      createdAt: new Date(info.createdAt).toISOString(),
      finishedAt: new Date(info.finishedAt).toISOString(),
      counts: { ...info.counts },
      links: publicLinks(info.id, publicUrl),
      summary:
        `batch ${info.id} finished in ${spanText(info.finishedAt - info.createdAt)}: ` +
        `${info.counts.done} done, ${info.counts.failed} failed, ${info.counts.rejected} rejected`,
    },
  };
}

/** account.paused (at the pause), or account.resumed (`resumedAt` given: the pause it ended). */
export function accountEvent(
  account: string,
  pause: AccountPause,
  batchId: string | undefined,
  publicUrl: string | undefined,
  resumedAt?: number,
): WebhookEvent<'account.paused' | 'account.resumed'> {
  return {
    type: resumedAt === undefined ? 'account.paused' : 'account.resumed',
    timestamp: new Date(resumedAt ?? pause.at).toISOString(),
    data: {
      account,
      code: pause.code,
      message: pause.message,
      pausedAt: new Date(pause.at).toISOString(),
      ...(resumedAt !== undefined ? { resumedAt: new Date(resumedAt).toISOString() } : {}),
      ...(batchId !== undefined ? { batchId, links: publicLinks(batchId, publicUrl) } : {}),
      summary:
        resumedAt === undefined
          ? `account ${account} paused: ${pause.message}`
          : `account ${account} resumed after ${spanText(resumedAt - pause.at)} paused (${pause.message})`,
    },
  };
}
