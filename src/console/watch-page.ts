// The console's page of watch lists: each list's schedule, what it is doing and why, its last
// round (what changed, with the changes to download) and its month budget; pause and resume.

import { dateText } from '../presenters/waits.js';
import { windowText } from '../watch/schedule.js';
import { everyText } from '../watch/view.js';
import type { WatchView } from '../watch/watches.js';
import { type Html, html } from './html.js';
import { formatNumber } from './i18n.js';
import { layout, type PageContext } from './pages.js';

export function watchesPage(ctx: PageContext, views: readonly WatchView[]): string {
  const { t } = ctx;
  return layout(
    ctx,
    t('watch.title'),
    html`<h1>${t('watch.title')}</h1>
<p class="muted">${t('watch.intro')}</p>
${
  views.length === 0
    ? html`<p>${t('watch.empty')}</p>`
    : html`<table class="stack" data-watches>
<thead><tr><th scope="col">${t('watch.col.name')}</th><th scope="col">${t('col.account')}</th><th scope="col">${t('watch.col.plates')}</th><th scope="col">${t('watch.col.schedule')}</th><th scope="col">${t('col.state')}</th><th scope="col">${t('watch.col.last')}</th><th scope="col">${t('watch.col.budget')}</th><th scope="col"></th></tr></thead>
<tbody>${views.map((v) => row(ctx, v))}</tbody>
</table>`
}`,
  );
}

function row(ctx: PageContext, v: WatchView): Html {
  const { t, lang } = ctx;
  const when =
    v.cron !== undefined ? t('watch.cron', { cron: v.cron }) : t('watch.every', { every: everyText(v.everyMs ?? 0) });
  const window =
    v.window !== undefined
      ? html`<br><span class="muted">${t('watch.window', { window: windowText(v.window) })}</span>`
      : '';
  const next =
    v.nextAt !== undefined
      ? html`<br><span class="muted">${t('watch.next', { at: dateText(ctx, v.nextAt) })}</span>`
      : '';
  const compared = [...v.rounds].reverse().find((r) => r.closedAt !== undefined);
  const running = v.open !== undefined ? html`<span>${t('watch.running', { round: v.open })}</span><br>` : '';
  const last =
    compared === undefined
      ? html`<span class="muted">${t('watch.none')}</span>`
      : compared.firstRecord
        ? html`${t('watch.first', { round: compared.round })}`
        : html`${t('watch.changed', { round: compared.round, plates: formatNumber(lang, compared.changedPlates ?? 0), changes: formatNumber(lang, compared.changes ?? 0) })}<br><a href="/watches/${encodeURIComponent(v.account)}/${encodeURIComponent(v.name)}/changes/${compared.round}">${t('watch.download', { round: compared.round })}</a>`;
  const budget =
    v.perMonth === undefined
      ? t('watch.noBudget')
      : t('watch.budget', { spent: formatNumber(lang, v.spentThisMonth), budget: formatNumber(lang, v.perMonth) });
  const stateClass = v.state === 'overlap' || v.state === 'held' || v.state === 'window' ? 'wait' : '';
  const action = v.paused ? 'resume' : 'pause';
  return html`<tr data-watch="${v.name}" data-state="${v.state}">
<th scope="row">${v.name}</th>
<td data-label="${t('col.account')}">${v.account}</td>
<td class="num" data-label="${t('watch.col.plates')}">${formatNumber(lang, v.plates)}</td>
<td data-label="${t('watch.col.schedule')}">${when}${window}${next}</td>
<td class="${stateClass}" data-label="${t('col.state')}">${t(`watch.state.${v.state}`)}${v.reason && lang === 'en' ? html`<br><span class="muted">${v.reason}</span>` : ''}</td>
<td data-label="${t('watch.col.last')}">${running}${last}</td>
<td class="num" data-label="${t('watch.col.budget')}">${budget}</td>
<td><form method="post" action="/watches/${encodeURIComponent(v.account)}/${encodeURIComponent(v.name)}/${action}"><input type="hidden" name="csrf" value="${ctx.session?.csrf ?? ''}"><button type="submit" class="secondary">${t(v.paused ? 'watch.resume' : 'watch.pause', { name: v.name })}</button></form></td>
</tr>`;
}
