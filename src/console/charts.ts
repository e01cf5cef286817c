// The console's pictures (issue 47, 6): plain SVG drawn here, on the server; no script and no
// outside host draws them, so the CSP stays as it is (colours come from app.css classes, never a
// style attribute). Each chart is a <figure>: an SVG with role="img" and a one-line aria-label,
// the same line visible in its caption, and its numbers in a table under a <details> for anyone
// who would rather read them (screen readers included). Every plotted point carries its numbers
// in data attributes (the browser tests compare them with the API's).

import { zoneName } from '../presenters/waits.js';
import type { BatchPoint, RatePoint } from '../queue/series.js';
import { type Html, html } from './html.js';
import { formatNumber, type Lang, type Translate } from './i18n.js';

interface ChartContext {
  lang: Lang;
  t: Translate;
  zone?: string | undefined;
}

/** The drawing's box; the SVG scales to its figure's width (app.css) and keeps its proportions. */
const W = 320;
const H = 120;
const PAD = 6;
/** Rows of a chart's table at most: evenly spread over its samples, the last one always in. */
const TABLE_ROWS = 12;

const TIMES = new Map<string, Intl.DateTimeFormat>();

/** A chart's time of day; the zone it is on goes with it (zoneOf) where it is shown. */
function timeText(ctx: ChartContext, at: number): string {
  const id = `${ctx.lang} ${ctx.zone ?? ''}`;
  let format = TIMES.get(id);
  if (format === undefined) {
    format = new Intl.DateTimeFormat(ctx.lang, {
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      ...(ctx.zone !== undefined ? { timeZone: ctx.zone } : {}),
    });
    TIMES.set(id, format);
  }
  return format.format(new Date(at));
}

/** A linear scale from [from, to] onto [a, b]; a span of zero maps everything to `a`. */
function scale(from: number, to: number, a: number, b: number): (v: number) => number {
  const span = to - from;
  return (v) => Math.round((span > 0 ? a + ((v - from) / span) * (b - a) : a) * 10) / 10;
}

function polyline(cls: string, xy: readonly (readonly [number, number])[]): Html {
  return html`<polyline class="${cls}" points="${xy.map(([x, y]) => `${x},${y}`).join(' ')}"/>`;
}

/** At most TABLE_ROWS items of `all`, evenly spread, the last always among them. */
function spread<T>(all: readonly T[]): T[] {
  if (all.length <= TABLE_ROWS) return [...all];
  const step = (all.length - 1) / (TABLE_ROWS - 1);
  return Array.from({ length: TABLE_ROWS }, (_, i) => all[Math.round(i * step)]!);
}

function figure(kind: string, label: string, svg: Html, table: Html, ctx: ChartContext): Html {
  return html`<figure class="chart" data-chart="${kind}">
${svg}
<figcaption>${label}</figcaption>
<details><summary>${ctx.t('chart.numbers')}</summary>${table}</details>
</figure>`;
}

function svgOpen(kind: string, label: string, height = H): Html {
  return html`<svg class="chart-${kind}" viewBox="0 0 ${W} ${height}" role="img" aria-label="${label}" focusable="false">`;
}

/** A batch's progress: done and failed over its life, and the line to its total at the ETA. */
export function progressChart(
  ctx: ChartContext,
  data: { points: readonly BatchPoint[]; total: number; etaAt?: number | undefined },
): Html {
  const { t, lang } = ctx;
  const { points, total } = data;
  const last = points.at(-1);
  if (!last) return html`<p class="muted" data-chart="progress">${t('chart.none')}</p>`;
  const n = (x: number) => formatNumber(lang, x);
  const end = Math.max(last.at, data.etaAt ?? last.at);
  const x = scale(points[0]!.at, end, PAD, W - PAD);
  const top = Math.max(1, total, ...points.map((p) => p.done + p.failed));
  const y = scale(0, top, H - PAD, PAD);
  const eta =
    data.etaAt !== undefined && data.etaAt > last.at
      ? polyline('eta', [
          [x(last.at), y(last.done + last.failed)],
          [x(data.etaAt), y(total)],
        ])
      : '';
  const label =
    t('chart.progress.now', { done: n(last.done), failed: n(last.failed), total: n(total) }) +
    (data.etaAt !== undefined
      ? ` · ${t('chart.progress.eta', { at: `${timeText(ctx, data.etaAt)} ${zoneName(ctx)}` })}`
      : '');
  const svg = html`${svgOpen('progress', `${t('chart.progress.title')}: ${label}`)}
${polyline('total', [
  [x(points[0]!.at), y(total)],
  [x(end), y(total)],
])}${eta}
${polyline(
  'done',
  points.map((p) => [x(p.at), y(p.done)]),
)}${polyline(
  'failed',
  points.map((p) => [x(p.at), y(p.failed)]),
)}
<g class="points">${points.map((p) => html`<circle class="pt" cx="${x(p.at)}" cy="${y(p.done)}" r="2" data-at="${p.at}" data-done="${p.done}" data-failed="${p.failed}"/>`)}</g>
</svg>`;
  const table = html`<table><thead><tr><th scope="col">${t('chart.col.time')} (${zoneName(ctx)})</th><th scope="col">${t('count.done')}</th><th scope="col">${t('count.failed')}</th></tr></thead>
<tbody>${spread(points).map((p) => html`<tr><th scope="row">${timeText(ctx, p.at)}</th><td class="num">${n(p.done)}</td><td class="num">${n(p.failed)}</td></tr>`)}</tbody></table>`;
  return figure('progress', `${t('chart.progress.title')}: ${label}`, svg, table, ctx);
}

function rateText(lang: Lang, perSecond: number): string {
  return formatNumber(lang, Math.round(perSecond * 10) / 10);
}

/** The account's requests a second against its rate in force, between each pair of samples. */
export function rateChart(ctx: ChartContext, rates: readonly RatePoint[]): Html {
  const { t, lang } = ctx;
  const last = rates.at(-1);
  if (!last) return html`<p class="muted" data-chart="rate">${t('chart.none')}</p>`;
  const x = scale(rates[0]!.from, last.at, PAD, W - PAD);
  const top = Math.max(0.1, ...rates.map((r) => Math.max(r.perSecond, r.limit))) * 1.1;
  const y = scale(0, top, H - PAD, PAD);
  const label = t('chart.rate.now', { rate: rateText(lang, last.perSecond), limit: rateText(lang, last.limit) });
  const steps = (value: (r: RatePoint) => number) =>
    rates.flatMap((r) => [[x(r.from), y(value(r))] as const, [x(r.at), y(value(r))] as const]);
  const svg = html`${svgOpen('rate', `${t('chart.rate.title')}: ${label}`)}
${polyline(
  'limit',
  steps((r) => r.limit),
)}${polyline(
  'rate',
  steps((r) => r.perSecond),
)}
<g class="points">${rates.map((r) => html`<circle class="pt" cx="${x(r.at)}" cy="${y(r.perSecond)}" r="2" data-at="${r.at}" data-rate="${Math.round(r.perSecond * 1000) / 1000}" data-limit="${r.limit}"/>`)}</g>
</svg>`;
  const table = html`<table><thead><tr><th scope="col">${t('chart.col.time')} (${zoneName(ctx)})</th><th scope="col">${t('chart.col.rate')}</th><th scope="col">${t('chart.col.limit')}</th></tr></thead>
<tbody>${spread(rates).map((r) => html`<tr><th scope="row">${timeText(ctx, r.at)}</th><td class="num">${rateText(lang, r.perSecond)}</td><td class="num">${rateText(lang, r.limit)}</td></tr>`)}</tbody></table>`;
  return figure('rate', `${t('chart.rate.title')}: ${label}`, svg, table, ctx);
}

/** One part of the outcomes bar: a kind (its colour), its words and its plates. */
export interface OutcomePart {
  kind: 'done' | 'failed' | 'cancelled' | 'inflight' | 'queued';
  label: string;
  count: number;
}

/** The batch's plates by outcome and reason, as one bar, with a legend that says the numbers. */
export function outcomesBar(ctx: ChartContext, parts: readonly OutcomePart[]): Html {
  const { t, lang } = ctx;
  const shown = parts.filter((p) => p.count > 0);
  const all = shown.reduce((sum, p) => sum + p.count, 0);
  if (all === 0) return html``;
  const n = (x: number) => formatNumber(lang, x);
  const label = shown.map((p) => `${p.label}: ${n(p.count)}`).join(', ');
  let at = 0;
  const rects = shown.map((p) => {
    const width = (p.count / all) * 1000;
    const rect = html`<rect class="part-${p.kind}" x="${Math.round(at * 10) / 10}" y="0" width="${Math.round(width * 10) / 10}" height="20" data-part="${p.label}" data-count="${p.count}"/>`;
    at += width;
    return rect;
  });
  return html`<figure class="chart bar" data-chart="outcomes">
<svg class="chart-outcomes" viewBox="0 0 1000 20" preserveAspectRatio="none" role="img" aria-label="${t('chart.outcomes.title')}: ${label}" focusable="false">${rects}</svg>
<figcaption><ul class="legend">${shown.map((p) => html`<li><span class="swatch part-${p.kind}" aria-hidden="true"></span>${p.label}: <strong class="num">${n(p.count)}</strong></li>`)}</ul></figcaption>
</figure>`;
}

/**
 * An account's use of its limit over the last hour: its requests a second as a share of its rate
 * in force, the limit drawn at 100 %. Small enough for a table cell.
 */
export function useChart(
  ctx: ChartContext,
  account: string,
  data: { rates: readonly RatePoint[]; from: number; to: number },
): Html {
  const { t, lang } = ctx;
  const last = data.rates.at(-1);
  if (!last) return html`<span class="muted" data-chart="use" data-account="${account}">${t('chart.use.idle')}</span>`;
  const share = (r: RatePoint) => (r.limit > 0 ? (r.perSecond / r.limit) * 100 : 0);
  const h = 48;
  const x = scale(data.from, data.to, 2, W - 2);
  const top = Math.max(100, ...data.rates.map(share)) * 1.1;
  const y = scale(0, top, h - 2, 2);
  const percent = (r: RatePoint) => formatNumber(lang, Math.round(share(r)));
  const label = t('chart.use.now', { account, percent: percent(last) });
  const svg = html`${svgOpen('use', `${t('chart.use.title')}: ${label}`, h)}
${polyline('limit', [
  [x(data.from), y(100)],
  [x(data.to), y(100)],
])}${polyline(
  'rate',
  data.rates.flatMap((r) => [[x(r.from), y(share(r))] as const, [x(r.at), y(share(r))] as const]),
)}
<g class="points">${data.rates.map((r) => html`<circle class="pt" cx="${x(r.at)}" cy="${y(share(r))}" r="1.5" data-at="${r.at}" data-rate="${Math.round(r.perSecond * 1000) / 1000}" data-limit="${r.limit}"/>`)}</g>
</svg>`;
  const table = html`<table><thead><tr><th scope="col">${t('chart.col.time')} (${zoneName(ctx)})</th><th scope="col">${t('chart.col.rate')}</th><th scope="col">${t('chart.col.use')}</th></tr></thead>
<tbody>${spread(data.rates).map((r) => html`<tr><th scope="row">${timeText(ctx, r.at)}</th><td class="num">${rateText(lang, r.perSecond)}</td><td class="num">${percent(r)} %</td></tr>`)}</tbody></table>`;
  return html`<figure class="chart use" data-chart="use" data-account="${account}">
${svg}
<figcaption>${label}</figcaption>
<details><summary>${t('chart.numbers')}</summary>${table}</details>
</figure>`;
}

/** What a batch page draws: its progress, its account's rate over the batch's life, its outcomes. */
export interface BatchChartData {
  points: readonly BatchPoint[];
  rates: readonly RatePoint[];
  total: number;
  etaAt?: number | undefined;
  outcomes: readonly OutcomePart[];
}

export function batchCharts(ctx: ChartContext, data: BatchChartData): Html {
  const { t } = ctx;
  return html`<section class="charts" data-charts>
<h2>${t('chart.title')}</h2>
${outcomesBar(ctx, data.outcomes)}
<div class="chart-grid">
${progressChart(ctx, data)}
${rateChart(ctx, data.rates)}
</div>
</section>`;
}
