// Why an account's line waits (paused, the upstream unreachable, a spending cap, the upstream's
// quota or rate limit, Redis down or full), and a deadline's judgement, in the reader's language
// (pt-BR or en). The one presenter of a wait: `vqb status`, `vqb pause`/`resume`, the progress
// line, the HTTP API's `message` and the library (presenters/line.ts waitingOf, in English) and
// the console's pages (in their reader's language) all word it here, from the reason and its
// fields, with the sentences of the shared catalogue (words.ts): a wording decided twice drifts
// (issue 45), and a translation is written once for every door that shows it. The doors differ
// only in how they write times (WordsCtx.times): the CLI and the API as zonedText does, which
// scripts and docs read; the console as Intl does, in its reader's language.

import { clock } from '../clock.js';
import { formatMoney, type Money } from '../money.js';
import type { AccountLineState } from '../queue/line.js';
import type { Waiting } from '../schemas/batch.js';
import { relativeText as agoText, localZone, spanText, zonedText } from '../time-text.js';
import { formatNumber, formatSeconds, isWordKey, type Lang, type WordKey, type Words, wordsFor } from '../words.js';

/**
 * The reader: their language, the clock instants are shown on (VQ_TIME_ZONE; the process's own
 * when absent), and how times are written (the console's, per language, when absent).
 */
export interface WordsCtx {
  lang: Lang;
  zone?: string | undefined;
  times?: TimeWords | undefined;
}

/** How a door writes the times in a wait's words. */
export interface TimeWords {
  /** An instant: "2026-11-27 18:00 America/Sao_Paulo", "27/11/2026, 18:00 America/Sao_Paulo". */
  at(at: number, now: number): string;
  /** How far an instant is from now: "3 min ago", "há 3 minutos". */
  ago(at: number, now: number): string;
  /** A length of time: "2 min 5 s", "2 min 05 s". */
  span(ms: number): string;
}

/**
 * The words of the CLI, the HTTP API and the library: English, instants as zonedText writes them
 * ("2026-11-27 18:00 America/Sao_Paulo", to the second within the hour; UTC without a zone),
 * lengths as spanText does ("2 min 5 s").
 */
export function terminalWords(zone?: string): WordsCtx {
  return {
    lang: 'en',
    zone,
    times: { at: (at, now) => zonedText(at, zone, now), ago: agoText, span: spanText },
  };
}

/** The console's way: dateText's instants, Intl's "3 minutes ago", formatSeconds's lengths. */
function pageTimes(ctx: WordsCtx): TimeWords {
  return {
    at: (at) => dateText(ctx, at),
    ago: (at, now) => relativeText(ctx.lang, at, now),
    span: (ms) => formatSeconds(ms / 1_000, ctx.lang),
  };
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

/** A wait's facts (waitingOf builds its `message` from them, here): a message it has is never read. */
export type WaitFacts = Omit<Waiting, 'message'> & { message?: string | undefined };

/** The batch a wait is about, for its own cap (a `budget` wait with no end time). */
export interface WaitBatch {
  id: string;
  maxCreates?: number | undefined;
  /** Its account has a price: the cap can be raised in money too (`--max-spend`). */
  priced?: boolean | undefined;
}

/** How to resume the account from a terminal: `vqb resume --account A` (`vqb resume` for the default one). */
export function resumeCommand(account: string | undefined): string {
  return account === undefined || account === 'default' ? '`vqb resume`' : `\`vqb resume --account ${account}\``;
}

/**
 * Why the line waits, in words: "paused: by an operator, in the console", "pausada: por um
 * operador, no console", "rate limited until 2026-11-27 18:00 America/Sao_Paulo". `line` gives the
 * details the reason alone lacks (the pause, the outage, the cap's period); `batch` the batch held
 * at its own cap.
 */
export function waitingText(
  ctx: WordsCtx,
  waiting: WaitFacts,
  line: AccountLineState | undefined,
  now?: number,
  batch?: WaitBatch,
): string;
export function waitingText(
  ctx: WordsCtx,
  waiting: WaitFacts | undefined,
  line: AccountLineState | undefined,
  now?: number,
  batch?: WaitBatch,
): string | undefined;
export function waitingText(
  ctx: WordsCtx,
  waiting: WaitFacts | undefined,
  line: AccountLineState | undefined,
  now = clock.now(),
  batch?: WaitBatch,
): string | undefined {
  if (waiting === undefined) return undefined;
  const t = wordsFor(ctx.lang);
  const times = ctx.times ?? pageTimes(ctx);
  const label = t(`wait.${waiting.reason}` as WordKey);
  const until = waiting.until !== undefined ? times.at(Date.parse(waiting.until), now) : '';
  switch (waiting.reason) {
    case 'paused': {
      const pause = line?.pause;
      // Paused with no reason recorded: only the way back is known.
      if (pause === undefined) return t('waitd.pausedBare', { label, resume: resumeCommand(line?.account) });
      return t('waitd.paused', { label, why: pauseWhy(t, pause) });
    }
    case 'upstream_unreachable': {
      const u = line?.unreachable;
      if (u === undefined) return label;
      return t('waitd.upstream_unreachable', {
        label,
        since: times.at(u.since, now),
        ago: times.ago(u.since, now),
        lasted: times.span(now - u.since),
        reason: reachText(t, u.reason),
        attempts: u.attempts,
      });
    }
    case 'budget': {
      // A batch's own cap has no end time (it waits until raised): no "until" to say.
      if (until === '')
        return t('waitd.budgetBatch', {
          label,
          max: batch?.maxCreates ?? '?',
          raise: `vqb budget ${batch?.id ?? '<batch>'} --max-creates N${batch?.priced ? ' (--max-spend X)' : ''}`,
        });
      const per = line?.budgetReason;
      return t(per === undefined ? 'waitd.budget' : `waitd.budget.${per}`, { label, until });
    }
    case 'quota':
      return t('waitd.quota', { label, until });
    case 'rate_limit':
      return t('waitd.rate_limit', { label, until });
    case 'redis_down':
      return t('waitd.redis_down', { label });
    case 'redis_full':
      return t('waitd.redis_full', { label });
  }
}

/** Who paused the account and why; for a key, what to do. */
function pauseWhy(t: Words, pause: NonNullable<AccountLineState['pause']>): string {
  if (pause.code === 'PAUSED_BY_OPERATOR') {
    if (pause.message === CONSOLE_PAUSE_REASON) return t('pause.console');
    if (pause.message === '' || DEFAULT_OPERATOR_REASONS.has(pause.message)) return t('pause.operator');
    return t('pause.operatorSaid', { reason: pause.message });
  }
  const vars = { code: pause.code, message: pause.message || pause.code };
  return KEY_PAUSES.has(pause.code) ? t(`pause.${pause.code}` as WordKey, vars) : t('pause.other', vars);
}

/** A failed connection in words: "connection refused", "conexão recusada"; "HTTP 502" and the unknown as is. */
function reachText(t: Words, reason: string): string {
  const key = `reach.${reason}`;
  return isWordKey(key) ? t(key) : reason;
}

/**
 * "upstream reachable again since 2026-11-24 14:05 UTC (3 min ago; it was unreachable 3 min:
 * connection refused)", for a while after an outage; undefined when there was none lately.
 */
export function recoveryText(ctx: WordsCtx, line: AccountLineState, now = clock.now()): string | undefined {
  const back = line.reachableAgain;
  if (back === undefined) return undefined;
  const t = wordsFor(ctx.lang);
  const times = ctx.times ?? pageTimes(ctx);
  const vars = { at: times.at(back.at, now), ago: times.ago(back.at, now), lasted: times.span(back.downMs) };
  return back.reason
    ? t('waitd.reachableAgain', { ...vars, reason: reachText(t, back.reason) })
    : t('waitd.reachableAgainBare', vars);
}

/** Pauses worded by their own catalogue entry; any other code is `pause.other`. */
const KEY_PAUSES = new Set(['INVALID_API_KEY', 'EXPIRED_API_KEY', 'INSUFFICIENT_PERMISSIONS', 'UNRECOGNISED_ANSWER']);

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
