// Why an account's line waits, and a deadline's judgement, in the reader's language (pt-BR or en):
// the console's pages and its tests read them here, from the reason and its fields, never from the
// English message the CLI prints (presenters/line.ts). The words are the shared catalogue's
// (words.ts), so a translation is written once for every door that shows it.

import { clock } from '../clock.js';
import { formatMoney, type Money } from '../money.js';
import type { AccountLineState } from '../queue/line.js';
import type { Waiting } from '../schemas/batch.js';
import { localZone } from '../time-text.js';
import { formatNumber, formatSeconds, type Lang, type WordKey, wordsFor } from '../words.js';

/** The reader: their language, and the clock instants are shown on (VQ_TIME_ZONE; the process's own when absent). */
export interface WordsCtx {
  lang: Lang;
  zone?: string | undefined;
}

const DATE_STYLES: Record<Lang, Intl.DateTimeFormatOptions> = {
  en: { dateStyle: 'medium', timeStyle: 'short' },
  'pt-BR': { dateStyle: 'short', timeStyle: 'short' },
};
const DATES = new Map<string, Intl.DateTimeFormat>();
const RELATIVE: Record<Lang, Intl.RelativeTimeFormat> = {
  en: new Intl.RelativeTimeFormat('en', { numeric: 'auto' }),
  'pt-BR': new Intl.RelativeTimeFormat('pt-BR', { numeric: 'auto' }),
};

/**
 * "24/11/2026, 14:03 America/Sao_Paulo" / "Nov 24, 2026, 2:03 PM America/Sao_Paulo": on the clock of
 * VQ_TIME_ZONE, named beside the time (issue 46, 12 and 17: an operator in another zone, or a
 * server left in UTC, must not read 17:00 as their own clock's), as the CLI's zonedText does.
 */
export function dateText(ctx: WordsCtx, at: number | string): string {
  return `${clockText(ctx, at)} ${zoneName(ctx)}`;
}

/** The zone instants are shown on: VQ_TIME_ZONE, else the process's own. */
export function zoneName(ctx: { zone?: string | undefined }): string {
  return ctx.zone ?? localZone();
}

/** The date and time alone (dateText without its zone). */
function clockText(ctx: WordsCtx, at: number | string): string {
  const id = `${ctx.lang} ${ctx.zone ?? ''}`;
  let format = DATES.get(id);
  if (format === undefined) {
    format = new Intl.DateTimeFormat(ctx.lang, {
      ...DATE_STYLES[ctx.lang],
      ...(ctx.zone !== undefined ? { timeZone: ctx.zone } : {}),
    });
    DATES.set(id, format);
  }
  return format.format(typeof at === 'string' ? new Date(at) : new Date(at));
}

/** "há 3 minutos" / "3 minutes ago", "em 2 horas" / "in 2 hours". */
export function relativeText(lang: Lang, at: number, now: number): string {
  const s = Math.round((at - now) / 1000);
  const abs = Math.abs(s);
  if (abs < 60) return RELATIVE[lang].format(s, 'second');
  if (abs < 3_600) return RELATIVE[lang].format(Math.round(s / 60), 'minute');
  if (abs < 172_800) return RELATIVE[lang].format(Math.round(s / 3_600), 'hour');
  return RELATIVE[lang].format(Math.round(s / 86_400), 'day');
}

/** What an operator wrote when pausing from the CLI or the console by default: not shown as their own words. */
const DEFAULT_OPERATOR_REASONS = new Set(['paused by an operator (vqb pause)', 'paused by an operator']);
/** The reason the console records when its button pauses an account. */
export const CONSOLE_PAUSE_REASON = 'paused in the console';

/** Why the line waits, in words: "pausada: por um operador, no console". */
export function waitingText(
  ctx: WordsCtx,
  waiting: Waiting | undefined,
  line: AccountLineState | undefined,
  now = clock.now(),
): string | undefined {
  if (waiting === undefined) return undefined;
  const { lang } = ctx;
  const t = wordsFor(lang);
  const label = t(`wait.${waiting.reason}` as WordKey);
  const said = detail(waiting, line, now);
  return said === undefined ? label : `${label}: ${said}`;
  function detail(w: Waiting, l: AccountLineState | undefined, at: number): string | undefined {
    const until = w.until !== undefined ? dateText(ctx, w.until) : '';
    switch (w.reason) {
      case 'paused': {
        const pause = l?.pause;
        if (pause === undefined || pause.code === 'PAUSED_BY_OPERATOR') {
          const message = pause?.message ?? '';
          if (message === CONSOLE_PAUSE_REASON) return t('pause.console');
          if (message === '' || DEFAULT_OPERATOR_REASONS.has(message)) return t('pause.operator');
          return t('pause.operatorSaid', { reason: message });
        }
        const known = `pause.${pause.code}` as WordKey;
        return KEY_PAUSES.has(pause.code) ? t(known) : t('pause.other', { code: pause.code });
      }
      case 'upstream_unreachable': {
        const u = l?.unreachable;
        if (u === undefined) return undefined;
        const reason = u.reason.startsWith('HTTP ') ? u.reason : t(`reach.${u.reason}` as WordKey);
        return t('waitd.upstream_unreachable', {
          since: dateText(ctx, u.since),
          ago: relativeText(lang, u.since, at),
          reason,
          attempts: u.attempts,
        });
      }
      case 'budget':
        // A batch's own cap has no end time (it waits until raised): no "until" to say.
        return until === '' ? t('waitd.budgetBatch') : t('waitd.budget', { until });
      case 'quota':
        return t('waitd.quota', { until });
      case 'rate_limit':
        return t('waitd.rate_limit', { until });
      case 'redis_down':
        return t('waitd.redis_down');
      case 'redis_full':
        return t('waitd.redis_full');
    }
  }
}

const KEY_PAUSES = new Set(['INVALID_API_KEY', 'EXPIRED_API_KEY', 'INSUFFICIENT_PERMISSIONS']);

/** A deadline's judgement as the API gives it (plans/deadline.ts deadlineView): what the console words. */
interface DeadlineShown {
  feasibility: 'feasible' | 'not feasible' | 'unknown';
  deadline: string;
  eta?: { from: string; to: string; expected: string } | undefined;
  slackSeconds?: number | undefined;
  aheadPlates: number;
  cost?: { low: Money; high: Money } | undefined;
  held?: { account: string; why: string }[] | undefined;
}

/**
 * The `deadline:` line in the page's language, built from the judgement's fields (the API and the
 * CLI keep the English line scripts read): "prazo: viável — até 27/11/2026 18:00 (em 2 horas);
 * termina em 40 min 00 s–52 min 00 s (no prazo, com folga de 12 min 00 s); custa R$ 10,00".
 */
export function deadlineText(ctx: WordsCtx, d: DeadlineShown, now = clock.now()): string {
  const { lang } = ctx;
  const t = wordsFor(lang);
  const due = Date.parse(d.deadline);
  const span = (ms: number) => formatSeconds(Math.abs(ms) / 1_000, lang);
  const dueText = t('deadline.due', { at: dateText(ctx, due), relative: relativeText(lang, due, now) });
  const cost = d.cost
    ? `; ${t('deadline.cost', {
        cost:
          d.cost.low.amount === d.cost.high.amount
            ? formatMoney(d.cost.low)
            : `${formatMoney(d.cost.low)}–${formatMoney(d.cost.high)}`,
      })}`
    : '';
  if (d.eta === undefined && d.held !== undefined && d.held.length > 0)
    return `${t('deadline.unknown')} — ${dueText}; ${t('deadline.keysHold', {
      keys: d.held.map((k) => `${k.account} (${k.why})`).join(', '),
    })}${cost}`;
  if (d.eta === undefined) return `${t('deadline.unknown')} — ${dueText}; ${t('deadline.noRate')}${cost}`;
  const from = Date.parse(d.eta.from);
  const to = Date.parse(d.eta.to);
  const slack =
    d.slackSeconds === undefined
      ? ''
      : d.slackSeconds >= 0
        ? t('deadline.onTime', { span: span(d.slackSeconds * 1_000) })
        : t('deadline.late', { span: span(d.slackSeconds * 1_000) });
  // A finished batch: when it finished, against its deadline.
  if (from === to && to <= now)
    return `${t(to <= due ? 'deadline.met' : 'deadline.missed')} — ${dueText}; ${t('deadline.finished', {
      at: dateText(ctx, to),
    })}${slack ? ` (${slack})` : ''}`;
  const verdict = t(
    d.feasibility === 'feasible'
      ? 'deadline.feasible'
      : d.feasibility === 'unknown'
        ? 'deadline.unknown'
        : 'deadline.notFeasible',
  );
  const ahead = d.aheadPlates > 0 ? `, ${t('deadline.ahead', { n: formatNumber(lang, d.aheadPlates) })}` : '';
  const range = t('deadline.range', { low: span(from - now), high: span(to - now) });
  return `${verdict} — ${dueText}; ${range}${ahead}${slack ? ` (${slack})` : ''}${cost}`;
}
