// What the console's charts read (issue 47, 6): the bounded series of queue/series.ts, sampled
// here while a page or its live updates look at a running batch, and the samples turned into what
// charts.ts draws. The current state is always the chart's last point, so the picture never lags
// the numbers beside it; a stored sample is taken at most once a gap, whoever asks.

import type { AccountLineState } from '../queue/line.js';
import type { FailedSummary } from '../queue/rerun.js';
import { ACCOUNT_WINDOW_MS, type AccountPoint, accountRequests, type BatchPoint, ratesOf } from '../queue/series.js';
import type { BatchView } from '../schemas/batch.js';
import type { QueueServices } from '../services.js';
import type { BatchChartData, OutcomePart } from './charts.js';
import type { Translate } from './i18n.js';

export type ChartServices = Pick<QueueServices, 'series' | 'costs'>;

/** Whether a batch still runs: its samples are taken only then (cost follows work). */
function running(view: BatchView): boolean {
  return view.state !== 'archived' && !view.finished;
}

/** Each account's requests counted today (one read of the day's ledger for them all). */
async function requestsToday(services: ChartServices): Promise<Map<string, number>> {
  const [today] = await services.costs.days(1);
  return new Map(Object.entries(today?.byAccount ?? {}).map(([account, c]) => [account, accountRequests(c)]));
}

/** The batch as a point now: the failed plates as the page counts them (a cancel's are apart). */
function pointOf(view: BatchView, at: number, requests: number, line?: AccountLineState): BatchPoint {
  const c = view.counts;
  const cancelled = typeof c.cancelled === 'number' ? c.cancelled : 0;
  return { at, done: c.done, failed: c.failed - cancelled, requests, limit: line?.rate?.perSecond ?? 0 };
}

/** Samples a running batch and its account (the live updates call it on each tick of its page). */
export async function sampleBatch(
  services: ChartServices,
  view: BatchView,
  line: AccountLineState | undefined,
  at: number,
): Promise<BatchPoint | undefined> {
  if (!running(view)) return undefined;
  const requests = (await requestsToday(services)).get(view.account) ?? 0;
  const point = pointOf(view, at, requests, line);
  const { at: _, ...values } = point;
  await Promise.all([
    services.series.sampleBatch({ id: view.id, account: view.account }, values),
    services.series.sampleAccount(view.account, { requests, limit: point.limit }),
  ]);
  return point;
}

/** The batch page's charts: its samples (a running batch sampled now), its rates, its outcomes. */
export async function batchChartData(
  services: ChartServices,
  view: BatchView,
  context: { line: AccountLineState | undefined; failed: FailedSummary | undefined; t: Translate; at: number },
): Promise<BatchChartData> {
  const { line, failed, t, at } = context;
  const current = await sampleBatch(services, view, line, at);
  const stored = view.state === 'archived' ? [] : await services.series.batch({ id: view.id, account: view.account });
  const points = current && (stored.at(-1)?.at ?? 0) < current.at ? [...stored, current] : stored;
  const c = view.counts;
  const cancelled = typeof c.cancelled === 'number' ? c.cancelled : 0;
  // A code is listed once per way to retry it: one part of the bar per code.
  const byCode = new Map<string, number>();
  for (const code of failed?.codes ?? []) byCode.set(code.code, (byCode.get(code.code) ?? 0) + code.count);
  const codes = [...byCode].map(([code, count]) => ({ code, count }));
  const coded = codes.reduce((sum, code) => sum + code.count, 0);
  const outcomes: OutcomePart[] = [
    { kind: 'done', label: t('count.done'), count: c.done },
    ...codes.map((code) => ({ kind: 'failed' as const, label: code.code, count: code.count })),
    { kind: 'failed', label: t('count.failed'), count: Math.max(0, c.failed - cancelled - coded) },
    { kind: 'cancelled', label: t('count.cancelled'), count: cancelled },
    { kind: 'inflight', label: t('count.inflight'), count: c.inflight },
    { kind: 'queued', label: t('count.queued'), count: c.queued },
  ];
  return {
    points,
    rates: ratesOf(points),
    total: c.enqueued,
    etaAt: view.eta && running(view) ? Date.parse(view.eta.at) : undefined,
    outcomes,
  };
}

/**
 * Each account's use of its limit over the last hour, for the accounts section. An account with a
 * running batch among `views` is sampled now; the others show what they stored while they ran.
 */
export async function accountUse(
  services: ChartServices,
  lines: readonly AccountLineState[],
  views: readonly BatchView[],
  at: number,
): Promise<Map<string, { rates: ReturnType<typeof ratesOf>; from: number; to: number }>> {
  const busy = new Set(views.filter(running).map((v) => v.account));
  const requests = busy.size > 0 ? await requestsToday(services) : new Map<string, number>();
  const from = at - ACCOUNT_WINDOW_MS;
  const use = new Map<string, { rates: ReturnType<typeof ratesOf>; from: number; to: number }>();
  await Promise.all(
    lines.map(async (line) => {
      let now: AccountPoint | undefined;
      if (busy.has(line.account)) {
        now = { at, requests: requests.get(line.account) ?? 0, limit: line.rate?.perSecond ?? 0 };
        await services.series.sampleAccount(line.account, { requests: now.requests, limit: now.limit });
      }
      const stored = await services.series.account(line.account, from);
      const points = now && (stored.at(-1)?.at ?? 0) < now.at ? [...stored, now] : stored;
      use.set(line.account, { rates: ratesOf(points), from, to: at });
    }),
  );
  return use;
}
