// The console's pages: small functions from data to HTML (html.ts escapes every value). Every page
// works without JavaScript; forms post to the server and the server redirects (POST → 303 → GET).
// Progress numbers carry `data-field` names that the live updates (app.js) fill in.

import type { RedisWaitReason } from '../accounts/wait.js';
import { costOf, formatMoney, type Price } from '../money.js';
import { rateText, waitingOf } from '../presenters/line.js';
import { dateText, deadlineText, waitingText } from '../presenters/waits.js';
import type { CostEstimate } from '../producers/dry-run.js';
import type { AccountLineState } from '../queue/line.js';
import type { FailedSummary } from '../queue/rerun.js';
import type { BatchView } from '../schemas/batch.js';
import { useChart } from './charts.js';
import { type Html, html } from './html.js';
import { formatNumber, formatSeconds, type Key, type Lang, type Translate } from './i18n.js';
import { plural } from './say.js';

export interface PageContext {
  lang: Lang;
  t: Translate;
  /** The page's own path and query, for the language switch to come back to. */
  path: string;
  /** Signed in: the session's CSRF token and whether the token is an administrator's. */
  session?: { csrf: string; admin: boolean };
  /** The clock instants are shown on (VQ_TIME_ZONE). */
  zone?: string;
}

export const ASSET_CSS = '/console/app.css';
export const ASSET_JS = '/console/app.js';
export const ASSET_ICON = '/console/icon.svg';

export function layout(ctx: PageContext, title: string, body: Html): string {
  const { t, lang, session } = ctx;
  const other: Lang = lang === 'en' ? 'pt-BR' : 'en';
  const switchHref = `/lang?to=${other}&back=${encodeURIComponent(ctx.path)}`;
  return html`<!doctype html>
<html lang="${lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${title} · ${t('app.title')}</title>
<link rel="icon" href="${ASSET_ICON}" type="image/svg+xml">
<link rel="stylesheet" href="${ASSET_CSS}">
<script src="${ASSET_JS}" defer></script>
</head>
<body>
<a class="skip" href="#main">${t('nav.skip')}</a>
<header>
<span class="brand">${t('app.title')}</span>
<nav aria-label="${t('app.title')}">
${session ? html`<a href="/">${t('nav.batches')}</a> <a href="/upload">${t('nav.upload')}</a> <a href="/watches">${t('nav.watches')}</a>${session.admin ? html` <a href="/admin/queues">${t('nav.dashboard')}</a>` : ''}` : ''}
<a href="${switchHref}" lang="${other}" hreflang="${other}" data-lang-switch>${t('nav.switch')}</a>
${session ? html`<form method="post" action="/sign-out"><input type="hidden" name="csrf" value="${session.csrf}"><button type="submit" class="link">${t('nav.signOut')}</button></form>` : ''}
</nav>
</header>
<main id="main" tabindex="-1">
${body}
</main>
</body>
</html>
`.text;
}

/**
 * The sign-in form: `csrf` is the pre-session token (the same as the form's cookie; a form posted
 * from another site has neither), `back` the path to go to once signed in.
 */
export function signInPage(ctx: PageContext, form: { csrf: string; back: string }, error?: string): string {
  const { t } = ctx;
  return layout(
    ctx,
    t('signIn.title'),
    html`<h1>${t('signIn.title')}</h1>
${error ? html`<p class="error" role="alert">${error}</p>` : ''}
<form method="post" action="/sign-in">
<input type="hidden" name="csrf" value="${form.csrf}">
${form.back !== '/' ? html`<input type="hidden" name="back" value="${form.back}">` : ''}
<label for="token">${t('signIn.token')}</label>
<input type="password" id="token" name="token" autocomplete="current-password" required aria-describedby="token-help" autofocus>
<p class="help" id="token-help">${t('signIn.help')}</p>
<button type="submit">${t('signIn.submit')}</button>
</form>`,
  );
}

/** The numbers of a batch that change while it runs, by `data-field` name; the live updates send the same. */
export function batchFields(
  view: BatchView,
  ctx: Pick<PageContext, 't' | 'lang' | 'zone'>,
  line?: AccountLineState,
): Record<string, string> {
  const { t, lang } = ctx;
  const c = view.counts;
  const n = (x: number) => formatNumber(lang, x);
  // Plates a cancel dropped are not failures (never sent): counted on their own (issue 46, 2).
  const cancelled = typeof c.cancelled === 'number' ? c.cancelled : 0;
  const failed = c.failed - cancelled;
  return {
    percent: `${n(view.progress.percent)} %`,
    counts: `${n(c.done)} / ${n(failed)} / ${n(c.inflight)} / ${n(c.queued)}`,
    eta: view.eta ? formatSeconds(view.eta.seconds, lang) : t('none'),
    // With a deadline: its line (ETA range, slack), marked when the projected finish passes it.
    deadline: view.deadline
      ? `${view.deadline.atRisk ? `${t('batch.atRisk')}: ` : ''}${deadlineText(ctx, view.deadline)}`
      : '',
    waiting: waitingText(ctx, view.waiting, line, undefined, view) ?? t('none'),
    state: t(
      view.state === 'archived'
        ? 'state.archived'
        : cancelled > 0
          ? 'state.cancelled'
          : view.finished
            ? 'state.finished'
            : view.sealed
              ? 'state.running'
              : 'state.ingesting',
    ),
    done: n(c.done),
    failed: n(failed),
    inflight: n(c.inflight),
    queued: n(c.queued),
    creates: n(c.creates),
    polls: n(c.polls),
    ...(view.cost ? { cost: formatMoney(view.cost) } : {}),
    // The list's cost: money at the account's price, else the queries paid for (a create each).
    spent: view.cost ? formatMoney(view.cost) : plural(ctx, 'list.queries', c.creates, { n: n(c.creates) }),
  };
}

const cell = (fields: Record<string, string>, name: string, label: string, cls = '') =>
  html`<td class="${cls}" data-label="${label}" data-field="${name}">${fields[name] ?? ''}</td>`;

export function flashBox(flash: string | undefined): Html | string {
  return flash ? html`<p class="flash" role="status">${flash}</p>` : '';
}

/** Each account's use of its limit over the last hour, as the accounts section draws it. */
export type AccountUse = ReadonlyMap<string, Parameters<typeof useChart>[2]>;

/** A search of the list (`?q=`): its words, and how many batches it looked at of how many. */
export interface ListSearch {
  q: string;
  searched: number;
  total: number;
}

export function listPage(
  ctx: PageContext,
  views: readonly BatchView[],
  lines: readonly AccountLineState[],
  flash?: string,
  redis?: RedisWaitReason,
  use?: AccountUse,
  search?: ListSearch,
): string {
  const { t, lang } = ctx;
  const lineOf = new Map(lines.map((l) => [l.account, l]));
  const rows = views.map((view) => {
    const f = batchFields(view, ctx, lineOf.get(view.account));
    // The name and the id keep one line each (cut with an ellipsis, whole in their title): a long
    // file name wrapped onto five lines at 1280 px (issue 46, 17).
    return html`<tr data-batch="${view.id}">
<th scope="row"><a class="one-line" href="/batches/${encodeURIComponent(view.id)}" title="${view.name}" data-name>${view.name}</a><span class="muted one-line" title="${view.id}">${view.id}</span></th>
<td data-label="${t('col.account')}">${view.account}</td>
<td data-label="${t('col.created')}" data-created>${dateText(ctx, view.createdAt)}</td>
<td class="num pct" data-label="${t('col.progress')}"><progress max="100" value="${view.progress.percent}" aria-hidden="true"></progress> <span data-field="percent" aria-live="polite">${f.percent}</span></td>
${cell(f, 'counts', t('col.counts'), 'num')}
${cell(f, 'eta', t('col.eta'), 'num')}
${cell(f, 'waiting', t('col.waiting'), view.waiting ? 'wait' : 'muted')}
${cell(f, 'state', t('col.state'))}
${cell(f, 'spent', t('col.cost'), 'num')}
</tr>`;
  });
  const q = search?.q ?? '';
  const live = q === '' ? '/events' : `/events?q=${encodeURIComponent(q)}`;
  const found = search
    ? html`<p role="status" data-found>${views.length === 0 ? t('list.foundNone', { q }) : plural(ctx, 'list.found', views.length, { n: formatNumber(lang, views.length), q })}${search.searched < search.total ? html` ${t('list.searchedNewest', { n: formatNumber(lang, search.searched) })}` : ''}</p>`
    : '';
  return layout(
    ctx,
    t('list.title'),
    html`<h1>${t('list.title')}</h1>
${flashBox(flash)}
<div class="actions"><a class="button secondary" href="/">${t('list.refresh')}</a> <a class="button" href="/upload">${t('nav.upload')}</a></div>
<form method="get" action="/" role="search" class="search"><label for="q">${t('list.search')}</label>
<input type="search" id="q" name="q" maxlength="100" value="${q}"> <button type="submit" class="secondary">${t('list.searchGo')}</button>${q !== '' ? html` <a href="/">${t('list.clear')}</a>` : ''}</form>
${found}
${
  views.length === 0
    ? search
      ? ''
      : html`<p>${t('list.empty')}</p>`
    : html`<table class="stack batches" data-live="${live}" aria-describedby="live-note">
<caption class="muted live-note" id="live-note">${t('list.live')}</caption>
<thead><tr><th scope="col">${t('col.batch')}</th><th scope="col">${t('col.account')}</th><th scope="col">${t('col.created')}</th><th scope="col">${t('col.progress')}</th><th scope="col">${t('col.counts')}</th><th scope="col">${t('col.eta')}</th><th scope="col">${t('col.waiting')}</th><th scope="col">${t('col.state')}</th><th scope="col">${t('col.cost')}</th></tr></thead>
<tbody>${rows}</tbody>
</table>`
}
${linesSection(ctx, lines, redis, use)}`,
  );
}

/** `redis`: this process cannot store (RedisHealth), which stops every line before its own reasons. */
function linesSection(
  ctx: PageContext,
  lines: readonly AccountLineState[],
  redis?: RedisWaitReason,
  use?: AccountUse,
): Html {
  const { t } = ctx;
  if (lines.length === 0) return html``;
  return html`<h2>${t('lines.title')}</h2>
<table class="stack">
<thead><tr><th scope="col">${t('col.account')}</th><th scope="col">${t('col.state')}</th><th scope="col">${t('col.waiting')}</th>${use ? html`<th scope="col">${t('chart.use.title')}</th>` : ''}<th scope="col"></th></tr></thead>
<tbody>${lines.map((line) => lineRow(ctx, line, redis, use))}</tbody>
</table>`;
}

function lineRow(ctx: PageContext, line: AccountLineState, redis?: RedisWaitReason, use?: AccountUse): Html {
  const { t } = ctx;
  const waiting = waitingOf(line, redis);
  const action = line.paused ? 'resume' : 'pause';
  return html`<tr data-account="${line.account}">
<th scope="row">${line.account} <span class="muted" data-field="rate">(${line.rate ? t(`rate.${line.rate.source}`, { rate: rateText(line.rate.perSecond, line.rate.windowMs) }) : line.rateLimit})</span></th>
<td data-label="${t('col.state')}">${t(line.paused ? 'line.paused' : 'line.running')}</td>
<td class="${waiting ? 'wait' : 'muted'}" data-label="${t('col.waiting')}">${waitingText(ctx, waiting, line) ?? t('none')}</td>
${use ? html`<td class="use" data-label="${t('chart.use.title')}">${useChart(ctx, line.account, use.get(line.account) ?? { rates: [], from: 0, to: 0 })}</td>` : ''}
<td><form method="post" action="/accounts/${encodeURIComponent(line.account)}/${action}?back=${encodeURIComponent(ctx.path)}"><input type="hidden" name="csrf" value="${ctx.session?.csrf ?? ''}"><button type="submit" class="secondary">${t(line.paused ? 'line.resume' : 'line.pause', { account: line.account })}</button></form></td>
</tr>`;
}

/**
 * One batch. `line` is its account's line, undefined for an archived batch: that one is read from
 * its archive's manifest, and nothing about it can change any more (no live updates, no retry,
 * no pause).
 */
export function batchPage(
  ctx: PageContext,
  view: BatchView,
  line: AccountLineState | undefined,
  formats: readonly string[],
  flash?: string,
  redis?: RedisWaitReason,
  failed?: FailedPlates,
  /** Its pictures (charts.ts): progress, its account's rate, its outcomes. */
  charts?: Html,
): string {
  const { t } = ctx;
  const archived = view.state === 'archived';
  const f = batchFields(view, ctx, line);
  const id = encodeURIComponent(view.id);
  const c = view.counts;
  const count = (key: Key, field: string | undefined, value: number) =>
    html`<dt>${t(key)}</dt><dd${field ? html` data-field="${field}"` : ''}>${field ? (f[field] ?? '') : formatNumber(ctx.lang, value)}</dd>`;
  return layout(
    ctx,
    t('batch.title', { id: view.name }),
    html`<p><a href="/">← ${t('batch.back')}</a></p>
<h1>${t('batch.title', { id: view.name })}</h1>
<p class="muted">${view.id} · ${view.account}</p>
${flashBox(flash)}
${archived ? html`<p class="flash" role="status" data-archived>${t('batch.archived', { at: view.archivedAt ? dateText(ctx, view.archivedAt) : '' })}</p>` : ''}
<div data-batch="${view.id}"${archived ? '' : html` data-live="/events?batch=${id}"`}>
<p><progress max="100" value="${view.progress.percent}" aria-hidden="true"></progress> <strong data-field="percent" aria-live="polite">${f.percent}</strong> · <span data-field="state" aria-live="polite">${f.state}</span> · ${t('col.eta')}: <span data-field="eta">${f.eta}</span></p>
<p>${t('col.waiting')}: <span data-field="waiting" class="${view.waiting ? 'wait' : 'muted'}">${f.waiting}</span></p>
${(view.waitingForKeys ?? []).map((k) => html`<p data-stranded="${k.account}" class="error">${t('batch.stranded', { plates: formatNumber(ctx.lang, k.plates), account: k.account, code: k.code })}</p>`)}
${view.deadline ? html`<p data-deadline><span data-field="deadline" class="${view.deadline.atRisk ? 'error' : ''}">${f.deadline}</span></p>` : ''}
<h2>${t('batch.counts')}</h2>
<dl class="counts">
${count('count.total', undefined, c.total)}${count('count.enqueued', undefined, c.enqueued)}${count('count.done', 'done', 0)}${count('count.failed', 'failed', 0)}${c.cancelled ? count('count.cancelled', undefined, c.cancelled) : ''}${count('count.inflight', 'inflight', 0)}${count('count.queued', 'queued', 0)}${count('count.rejected', undefined, c.rejected)}${count('count.duplicates', undefined, c.duplicates)}${count('count.reused', undefined, c.reused)}${count('count.creates', 'creates', 0)}${count('count.polls', 'polls', 0)}${view.cost ? count('count.cost', 'cost', 0) : ''}
</dl>
</div>
${charts ?? ''}
<h2>${t('batch.downloads')}</h2>
<ul>
${formats.map((format) => html`<li><a href="/batches/${id}/results?format=${format}" download>${format.toUpperCase()}</a></li>`)}
<li><a href="/batches/${id}/rejects" download>${t('batch.rejects')}</a></li>
</ul>
${webhooksSection(ctx, view)}
${archived ? '' : html`<section data-failures data-key="${failedKey(failed)}">${failedSection(ctx, view.id, failed)}</section>`}
${line ? linesSection(ctx, [line], redis) : ''}`,
  );
}

/** A batch's failed plates as the page shows them, and its account's price (what a retry costs). */
export interface FailedPlates {
  /** By code, as last counted; undefined while a large batch's first count is made (failed-plates.ts). */
  summary?: FailedSummary | undefined;
  price?: Price | undefined;
  /** The summary is of the batch as it is now; false: the last count, made at `at`, a new one under way. */
  current?: boolean;
  at?: number | undefined;
  /** The batch's failed plates now, a cancel's left out (what a count under way will find). */
  failed?: number;
}

/** Changes whenever the failed section would: the page's script replaces the section only then. */
export function failedKey(failed: FailedPlates | undefined): string {
  const summary = failed?.summary;
  if (!summary) return failed?.current === false ? `counting ${failed.failed ?? 0}` : '0';
  const stale = failed?.current === false ? `stale ${failed.at ?? 0} ` : '';
  if (summary.total === 0 && !summary.cancelled) return stale ? `${stale}0` : '0';
  return (
    `${stale}c${summary.cancelled} ` +
    summary.codes.map((c) => `${c.way}:${c.code}:${c.count}:${c.plates.join(',')}`).join(' ')
  );
}

/**
 * The failed plates by error code and the retries that make sense, each saying its cost before
 * the click (issue 36, 11): "poll again" (no new query) for plates whose answer never came, "ask
 * again" (a new query each, paid) for the ones the upstream answered or that have no query. Sent
 * whole by the live updates too, so the list, its counts and its buttons never disagree.
 */
export function failedSection(ctx: PageContext, batchId: string, failed: FailedPlates | undefined): Html {
  const { t, lang } = ctx;
  const summary = failed?.summary;
  const n = (x: number) => formatNumber(lang, x);
  // A large batch's first count is made in the background: the page says so, and the live
  // updates (or a refresh) bring the list.
  if (!summary && failed?.current === false)
    return html`<h2>${t('failed.title')}</h2><p class="muted" role="status" data-failed-counting>${plural(ctx, 'failed.counting', failed.failed ?? 0, { n: n(failed.failed ?? 0) })}</p>`;
  // Plates a cancel dropped are their own state: never sent, never charged, never offered again.
  const cancelled = summary?.cancelled
    ? html`<p data-cancelled>${plural(ctx, 'failed.cancelled', summary.cancelled, { n: n(summary.cancelled) })}</p>`
    : '';
  const stale =
    failed?.current === false && failed.at !== undefined
      ? html`<p class="muted" role="status" data-failed-stale>${t('failed.stale', { at: dateText(ctx, failed.at), n: n(failed.failed ?? 0) })}</p>`
      : '';
  if (!summary || summary.total === 0)
    return html`${cancelled}${stale}<p class="muted" data-no-failed>${t('batch.noFailed')}</p>`;
  const price = failed?.price;
  const form = (way: 'poll' | 'ask', label: string) =>
    html`<form method="post" action="/batches/${encodeURIComponent(batchId)}/retry"><input type="hidden" name="csrf" value="${ctx.session?.csrf ?? ''}"><input type="hidden" name="way" value="${way}"><button type="submit" data-retry="${way}"${way === 'ask' ? html` class="secondary"` : ''}>${label}</button></form>`;
  const pollPrice = price && price.perPollMicros > 0 ? t('retry.pollBilled') : t('retry.free');
  const askCost = price ? `, ${formatMoney(costOf(price, summary.ask))}` : '';
  return html`${cancelled}<h2>${t('failed.title')}</h2>
${stale}<table class="stack" data-failed-list>
<thead><tr><th scope="col">${t('col.code')}</th><th scope="col">${t('col.plates')}</th><th scope="col">${t('col.retry')}</th></tr></thead>
<tbody>${summary.codes.map(
    (c) => html`<tr data-code="${c.code}" data-way="${c.way}">
<th scope="row"><code>${c.code}</code></th>
<td data-label="${t('col.plates')}"><strong class="num">${n(c.count)}</strong>: <code>${c.plates.join(', ')}</code>${c.count > c.plates.length ? html` ${t('failed.more', { n: n(c.count - c.plates.length) })}` : ''}</td>
<td data-label="${t('col.retry')}">${t(`failed.way.${c.way}`)}</td>
</tr>`,
  )}</tbody>
</table>
<div class="actions">
${summary.poll > 0 ? form('poll', plural(ctx, 'retry.poll', summary.poll, { n: n(summary.poll), price: pollPrice })) : ''}
${summary.ask > 0 ? form('ask', plural(ctx, 'retry.ask', summary.ask, { n: n(summary.ask), cost: askCost })) : ''}
</div>`;
}

/**
 * Before a paid retry above VQ_CONFIRM_ABOVE: what it buys and its price, and the one button that
 * sends it (the same form with `confirmed`). Going back sends nothing.
 */
export function confirmRetryPage(ctx: PageContext, batchId: string, ask: number, cost: string): string {
  const { t, lang } = ctx;
  const id = encodeURIComponent(batchId);
  return layout(
    ctx,
    t('confirm.title'),
    html`<h1>${t('confirm.title')}</h1>
<p data-confirm-price>${plural(ctx, 'confirm.ask', ask, { n: formatNumber(lang, ask), cost })}</p>
<div class="actions">
<form method="post" action="/batches/${id}/retry"><input type="hidden" name="csrf" value="${ctx.session?.csrf ?? ''}"><input type="hidden" name="way" value="ask"><input type="hidden" name="confirmed" value="${String(ask)}"><button type="submit" data-retry-confirm>${t('confirm.go', { cost })}</button></form>
<a href="/batches/${id}" data-confirm-back>${t('confirm.back')}</a>
</div>`,
  );
}

/** A delivery's last failure as the API says it (a category, never the socket's words), with the HTTP status. */
function deliveryError(d: NonNullable<BatchView['webhooks']>[number]): string | undefined {
  const status = d.lastStatus !== undefined ? `HTTP ${d.lastStatus}` : undefined;
  if (d.lastError === undefined) return status;
  return status !== undefined ? `${d.lastError} (${status})` : d.lastError;
}

/** Where the batch's webhooks go and what became of each delivery (its `webhooks`, as the API shows them). */
function webhooksSection(ctx: PageContext, view: BatchView): Html | string {
  const { t, lang } = ctx;
  if (view.callbackUrl === undefined) return '';
  const deliveries = view.webhooks ?? [];
  return html`<h2>${t('webhooks.title')}</h2>
<p>${t('webhooks.callback')}: <code data-callback>${view.callbackUrl}</code></p>
${
  deliveries.length === 0
    ? html`<p class="muted">${t('webhooks.none')}</p>`
    : html`<table class="stack" data-webhooks>
<thead><tr><th scope="col">${t('col.event')}</th><th scope="col">${t('col.state')}</th><th scope="col">${t('col.attempts')}</th><th scope="col">${t('col.lastError')}</th></tr></thead>
<tbody>${deliveries.map(
        (d) => html`<tr data-delivery="${d.id}">
<th scope="row"><code>${d.event}</code></th>
<td data-delivery-state="${d.state}" data-label="${t('col.state')}">${t(`delivery.${d.state}` as Key)}</td>
<td class="num" data-label="${t('col.attempts')}">${formatNumber(lang, d.attempts)}</td>
<td data-label="${t('col.lastError')}">${deliveryError(d) ?? t('none')}</td>
</tr>`,
      )}</tbody>
</table>`
}`;
}

/** What the upload form said, kept on the page that shows a refusal. */
export interface UploadValues {
  column?: string;
  sheet?: string;
  callbackUrl?: string;
  deadline?: string;
}

export function uploadPage(
  ctx: PageContext,
  accounts: readonly string[],
  error?: string,
  values: UploadValues = {},
  /** The pools of keys the session may use (every key of each is its token's): docs/plans.md. */
  pools: readonly string[] = [],
): string {
  const { t } = ctx;
  return layout(
    ctx,
    t('upload.title'),
    html`<h1>${t('upload.title')}</h1>
${error ? html`<p class="error" role="alert">${error}</p>` : ''}
<form method="post" action="/upload" enctype="multipart/form-data">
<input type="hidden" name="csrf" value="${ctx.session?.csrf ?? ''}">
${
  accounts.length > 1
    ? html`<label for="account">${t('upload.account')}</label><select id="account" name="account">${accounts.map((a) => html`<option value="${a}">${a}</option>`)}</select>`
    : ''
}
${
  pools.length > 0
    ? html`<label for="pool">${t('upload.pool')}</label><select id="pool" name="pool"><option value="">${t('upload.noPool')}</option>${pools.map((p) => html`<option value="${p}">${p}</option>`)}</select>`
    : ''
}
<p><label for="column">${t('upload.column')}</label>
<input type="text" id="column" name="column" maxlength="200" autocomplete="off" aria-describedby="column-help" value="${values.column ?? ''}">
<span class="help" id="column-help">${t('upload.columnHelp')}</span></p>
<p><label for="sheet">${t('upload.sheet')}</label>
<input type="text" id="sheet" name="sheet" maxlength="200" autocomplete="off" aria-describedby="sheet-help" value="${values.sheet ?? ''}">
<span class="help" id="sheet-help">${t('upload.sheetHelp')}</span></p>
<div class="drop" data-drop>
<p>${t('upload.drop')}</p>
<label for="file">${t('upload.file')}</label>
<input type="file" id="file" name="file" required accept=".csv,.txt,.xlsx,text/csv,application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" aria-describedby="file-help">
<p class="help" id="file-help">${t('upload.help')} <span data-file-name aria-live="polite"></span></p>
</div>
<p><label for="callbackUrl">${t('upload.callback')}</label>
<input type="url" id="callbackUrl" name="callbackUrl" maxlength="2048" inputmode="url" autocomplete="url" aria-describedby="callback-help" value="${values.callbackUrl ?? ''}">
<span class="help" id="callback-help">${t('upload.callbackHelp')}</span></p>
<p><label for="deadline">${t('upload.deadline')}</label>
<input type="text" id="deadline" name="deadline" maxlength="64" aria-describedby="deadline-help" value="${values.deadline ?? ''}">
<span class="help" id="deadline-help">${t('upload.deadlineHelp')}</span></p>
<p><button type="submit">${t('upload.submit')}</button></p>
</form>`,
  );
}

export function estimatePage(
  ctx: PageContext,
  stageId: string,
  name: string,
  account: string,
  e: CostEstimate,
  callbackUrl?: string,
): string {
  const { t, lang } = ctx;
  const n = (x: number) => formatNumber(lang, x);
  const item = (key: Key, value: string, field: string) =>
    html`<dt>${t(key)}</dt><dd data-estimate="${field}">${value}</dd>`;
  return layout(
    ctx,
    t('estimate.title', { name }),
    html`<h1>${t('estimate.title', { name })}</h1>
<p>${t('estimate.intro')}</p>
<p class="muted">${e.batchId} · ${account}</p>
${callbackUrl ? html`<p>${t('webhooks.callback')}: <code data-callback>${callbackUrl}</code></p>` : ''}
<dl class="counts">
${item('estimate.rows', n(e.rows), 'rows')}${item('estimate.plates', n(e.plates), 'plates')}${item('estimate.rejected', n(e.rejected), 'rejected')}${item('estimate.duplicates', n(e.duplicates), 'duplicates')}${item('estimate.alreadyFinished', n(e.alreadyFinished), 'alreadyFinished')}${item('estimate.reusable', n(e.reusable), 'reusable')}${item('estimate.creates', n(e.creates), 'creates')}${item('estimate.expectedPolls', n(e.expectedPolls), 'expectedPolls')}${item('estimate.time', formatSeconds(e.secondsAtRate, lang), 'secondsAtRate')}${e.daysAtCap !== undefined ? item('estimate.days', n(e.daysAtCap), 'daysAtCap') : ''}${e.cost ? item('estimate.cost', formatMoney(e.cost), 'cost') : ''}
</dl>
${e.deadline ? html`<p data-estimate="deadline" class="${e.deadline.feasibility === 'not feasible' ? 'error' : ''}">${deadlineText(ctx, e.deadline)}</p>` : ''}
${estimateActions(ctx, stageId, e)}`,
  );
}

/**
 * Confirm only when there is something to send: a file whose plates are all finished already says
 * so and opens its batch; a file with no valid plate says there is nothing to confirm.
 */
function estimateActions(ctx: PageContext, stageId: string, e: CostEstimate): Html {
  const { t, lang } = ctx;
  const n = (x: number) => formatNumber(lang, x);
  const cancel = html`<a class="button secondary" href="/upload">${t('estimate.cancel')}</a>`;
  if (e.plates === 0)
    return html`<p class="flash" role="status" data-estimate-nothing>${t('estimate.nothing', { rejected: n(e.rejected), duplicates: n(e.duplicates) })}</p><div class="actions">${cancel}</div>`;
  if (e.alreadyFinished >= e.plates) {
    return html`<p class="flash" role="status" data-estimate-done>${t('estimate.alreadyDone', { id: e.batchId })}</p>
<div class="actions"><a class="button" href="/batches/${encodeURIComponent(e.batchId)}">${t('estimate.openBatch')}</a> ${cancel}</div>`;
  }
  return html`<div class="actions">
<form method="post" action="/upload/${stageId}/confirm"><input type="hidden" name="csrf" value="${ctx.session?.csrf ?? ''}"><button type="submit">${t('estimate.confirm')}</button></form>
${cancel}
</div>`;
}

export function errorPage(ctx: PageContext, message: string, detail?: string): string {
  const { t } = ctx;
  return layout(
    ctx,
    t('error.title'),
    html`<h1>${t('error.title')}</h1><p class="error" role="alert">${message}</p>${
      detail
        ? html`<details><summary>${t('error.details')}</summary><p><code lang="en">${detail}</code></p></details>`
        : ''
    }<p><a href="/">${t('error.back')}</a></p>`,
  );
}
