// A batch's deadline: read from what a person or a client writes (`18:00`, an ISO instant, `2h`),
// and judged against what vqb knows of its account: the rate in force and how sure it is of it,
// the requests a plate takes, the upstream's answer time and the work ahead of the batch on the
// same key. Pure: `now` and every figure are handed in, so the dry run, the enqueue, `vqb status`,
// the API and the worker's watch all judge alike (docs/plans.md).
import { InputError } from '../errors.js';
import { costOf, formatMoney, type Money, type Price } from '../money.js';
import { localZone, spanText, wallClock, zonedInstant, zonedText } from '../time-text.js';

const S = 1_000;
const UNITS: Record<string, number> = { d: 86_400 * S, h: 3_600 * S, m: 60 * S, min: 60 * S, s: S };

/** A length of time as `2h`, `90m`, `1h30m`, `45s`, `1d` (a unit is required: `90` alone is ambiguous). */
export function parseSpan(text: string): number | undefined {
  const t = text.trim().toLowerCase().replaceAll(' ', '');
  if (!/^(\d+(\.\d+)?(d|h|min|m|s))+$/.test(t)) return undefined;
  let ms = 0;
  for (const [, n, unit] of t.matchAll(/(\d+(?:\.\d+)?)(d|h|min|m|s)/g)) ms += Number(n) * UNITS[unit!]!;
  return Math.round(ms);
}

const CLOCK = /^(\d{1,2}):(\d{2})(?::(\d{2}))?$/;
const INSTANT = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/i;
/** An ISO date and time with no offset: a wall-clock time. */
const WALL_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?$/i;

/**
 * An instant as a person writes it: `18:00` (on the clock of `zone`, VQ_TIME_ZONE: today, or
 * tomorrow when it has passed), or an ISO instant (`2026-11-27T18:00:00Z`; `2026-11-27 18:00`,
 * with no offset, on the clock of `zone`). BAD_DEADLINE for anything else, or for an instant
 * already past.
 */
export function parseInstant(text: string, now: number, zone = localZone()): number {
  const t = text.trim();
  const clock = CLOCK.exec(t);
  if (clock) {
    const [h, m, s] = [Number(clock[1]), Number(clock[2]), Number(clock[3] ?? 0)];
    if (h > 23 || m > 59 || s > 59) throw badDeadline(text, 'no such time of day');
    const [y, mo, d] = wallClock(now, zone);
    const today = zonedInstant(zone, y, mo, d, h, m, s);
    return today > now ? today : zonedInstant(zone, y, mo, d + 1, h, m, s);
  }
  if (!INSTANT.test(t)) throw badDeadline(text, 'write a time of day (18:00), an ISO instant (2026-11-27T18:00Z)');
  const wall = WALL_TIME.exec(t);
  const at = wall
    ? zonedInstant(
        zone,
        ...(wall.slice(1, 6).map(Number) as [number, number, number, number, number]),
        Number(wall[6] ?? 0),
      )
    : Date.parse(t.replace(' ', 'T'));
  if (
    !Number.isFinite(at) ||
    (wall && zonedText(at, zone).slice(0, 16) !== `${wall[1]}-${wall[2]}-${wall[3]} ${wall[4]}:${wall[5]}`)
  )
    throw badDeadline(text, 'no such date');
  if (at <= now) throw badDeadline(text, `it passed ${spanText(now - at)} ago`);
  return at;
}

function badDeadline(text: string, why: string): InputError {
  return new InputError('BAD_DEADLINE', `deadline ${JSON.stringify(text)} cannot be used: ${why}`);
}

/**
 * The deadline a door was given, as epoch ms: `by` an instant, `within` a span from now, or
 * `deadline` either (the API's and the library's one field: a span such as `2h`, or an instant;
 * a number is epoch ms). Undefined when none was given; BAD_DEADLINE when two were, or one cannot
 * be read.
 */
export function parseDeadline(
  given: { by?: string | undefined; within?: string | undefined; deadline?: string | number | undefined },
  now: number,
  zone?: string,
): number | undefined {
  const at = readDeadline(given, now, zone);
  // A deadline is shown as a date everywhere (the API, the console, webhooks): one past the Date
  // range (`99999999999d`, 8640000000000001) cannot be one.
  if (at !== undefined && !(at <= MAX_DATE_MS))
    throw badDeadline(String(given.by ?? given.within ?? given.deadline), 'it is past the last date a clock can show');
  return at;
}

/** The largest epoch ms a Date holds (ECMA-262): past it, toISOString throws. */
const MAX_DATE_MS = 8_640_000_000_000_000;

function readDeadline(
  given: { by?: string | undefined; within?: string | undefined; deadline?: string | number | undefined },
  now: number,
  zone?: string,
): number | undefined {
  const set = [given.by, given.within, given.deadline].filter((v) => v !== undefined);
  if (set.length === 0) return undefined;
  if (set.length > 1) throw new InputError('BAD_DEADLINE', 'give one deadline: --by (an instant) or --within (a span)');
  if (given.within !== undefined) {
    const span = parseSpan(given.within);
    if (span === undefined || span <= 0)
      throw badDeadline(given.within, 'write a span with its unit: 90m, 2h, 1h30m, 1d');
    return now + span;
  }
  const value = given.by ?? given.deadline!;
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value <= now) throw badDeadline(String(value), 'an instant in epoch ms, not past');
    return value;
  }
  const span = given.deadline !== undefined ? parseSpan(value) : undefined;
  if (span !== undefined) {
    if (span <= 0) throw badDeadline(value, 'a span of zero');
    return now + span;
  }
  return parseInstant(value, now, zone);
}

/** A key of a pooled batch that holds, and why (a pause's code, `quota`, `rate_limit`, `budget`). */
export interface HeldKey {
  account: string;
  why: string;
}

/** What the judgement reads of the account and the batch. */
export interface PlanFigures {
  /** The rate in force, requests a second; undefined while none is known (an `auto` account before first contact). */
  perSecond: number | undefined;
  /** configured / announced: known; learned: may move either way (a probe, a 429). */
  rateSource: 'configured' | 'start' | 'announced' | 'learned';
  /** Requests a plate takes (its create and its polls), as expected. */
  requestsPerPlate: number;
  /** The upstream's answer time: the wait before a query's first poll (the poll learner's). */
  answerMs: number;
  /** The batch's own plates still to finish. */
  plates: number;
  /** Plates ahead of it on the same key: interactive ones and those of batches due earlier. */
  aheadPlates: number;
  /** A pooled batch none of whose keys serves: each key and why it holds (its rate is then unknown). */
  held?: readonly HeldKey[];
}

export interface EtaRange {
  /** From now, ms: at the fast and at the slow end of what is known. */
  lowMs: number;
  highMs: number;
  /** The expected finish (mid), ms from now: what "at risk" and "on time by" are judged on. */
  expectedMs: number;
}

/** How far the rate may turn out from the one in force, by where it comes from: [fast, slow] factors. */
const RATE_SPREAD: Record<PlanFigures['rateSource'], [number, number]> = {
  configured: [1, 0.95],
  announced: [1, 0.95],
  learned: [1.05, 0.85],
  start: [1, 1],
};

/** The time left for the batch's plates, and those ahead of it, on one key; undefined while no rate is known. */
export function etaRange(f: PlanFigures): EtaRange | undefined {
  if (f.perSecond === undefined || f.perSecond <= 0 || f.rateSource === 'start') return undefined;
  if (f.plates <= 0) return { lowMs: 0, highMs: 0, expectedMs: 0 };
  const plates = f.plates + f.aheadPlates;
  const [fast, slow] = RATE_SPREAD[f.rateSource];
  const perPlate = Math.max(1, f.requestsPerPlate);
  // The requests a plate takes vary by its polls: a twentieth fewer to a tenth more than expected.
  const low = ((plates * perPlate * 0.95) / (f.perSecond * fast)) * S + f.answerMs * 0.5;
  const high = ((plates * perPlate * 1.1) / (f.perSecond * slow)) * S + f.answerMs * 1.5 + 2 * S;
  const expected = ((plates * perPlate) / f.perSecond) * S + f.answerMs;
  return { lowMs: Math.round(low), highMs: Math.round(high), expectedMs: Math.round(expected) };
}

export type Feasibility = 'feasible' | 'not feasible' | 'unknown';

export interface DeadlineVerdict {
  feasibility: Feasibility;
  /** Epoch ms. */
  deadline: number;
  /** ETA range as epoch ms (absent while unknown). */
  eta?: { low: number; high: number; expected: number };
  /** The deadline less the expected finish, ms (negative: late by that much). */
  slackMs?: number;
  aheadPlates: number;
  cost?: { low: Money; high: Money };
  /** While unknown: what would make the rate known. */
  knownBy?: string;
  /** While unknown because every key of the batch's pool holds: each key and why. */
  held?: readonly HeldKey[];
}

/**
 * Feasible when even the slow end of the range is in time; not feasible when it is not (a batch
 * that makes it only at the fast end is said so, not promised); unknown while no rate is known.
 */
export function judgeDeadline(
  deadline: number,
  f: PlanFigures,
  now: number,
  money?: { price: Price; creates: number; polls: number },
  account = 'default',
): DeadlineVerdict {
  const range = etaRange(f);
  const cost = money ? costRange(money.price, money.creates, money.polls) : undefined;
  const base = { deadline, aheadPlates: f.aheadPlates, ...(cost ? { cost } : {}) };
  if (!range && f.held !== undefined && f.held.length > 0)
    return {
      ...base,
      feasibility: 'unknown',
      held: f.held,
      knownBy:
        `one of its keys serving again (every key of its pool holds now: ` +
        `${f.held.map((k) => `${k.account} ${k.why}`).join(', ')}; \`vqb status\` says what each needs)`,
    };
  if (!range)
    return {
      ...base,
      feasibility: 'unknown',
      knownBy:
        `the rate of account ${account} is known after its first contact with the upstream ` +
        `(its first answers), or at once with \`vqb check${account === 'default' ? '' : ` --account ${account}`}\``,
    };
  const eta = { low: now + range.lowMs, high: now + range.highMs, expected: now + range.expectedMs };
  return {
    ...base,
    feasibility: eta.high <= deadline ? 'feasible' : 'not feasible',
    eta,
    slackMs: deadline - eta.expected,
  };
}

/** The cost of the creates (exact) and the polls (a tenth fewer to a tenth more than expected). */
function costRange(price: Price, creates: number, polls: number): { low: Money; high: Money } {
  return {
    low: costOf(price, creates, Math.max(creates, Math.round(polls * 0.9))),
    high: costOf(price, creates, Math.round(polls * 1.1)),
  };
}

/** "on time by 12 min" / "late by 3 min", from the slack. */
export function slackText(slackMs: number): string {
  return slackMs >= 0 ? `on time by ${spanText(slackMs)}` : `late by ${spanText(-slackMs)}`;
}

/** The line a person reads at enqueue and in the dry run: `deadline: feasible …` on a line of its own. */
export function deadlineLine(v: DeadlineVerdict, now: number, zone?: string): string {
  const due = `due ${zonedText(v.deadline, zone, now)} (in ${spanText(v.deadline - now)})`;
  const ahead = v.aheadPlates > 0 ? `, after ${v.aheadPlates} plates ahead of it on the key` : '';
  const cost = v.cost
    ? v.cost.low.amount === v.cost.high.amount
      ? `; costs ${formatMoney(v.cost.low)}`
      : `; costs ${formatMoney(v.cost.low)}–${formatMoney(v.cost.high)}`
    : '';
  if (!v.eta && v.held) return `deadline: unknown — ${due}; no key serves it now: known after ${v.knownBy}${cost}`;
  if (!v.eta) return `deadline: unknown — ${due}; no rate known yet: ${v.knownBy ?? ''}${cost}`;
  // A finished batch: when it finished, against its deadline.
  if (v.eta.low === v.eta.high && v.eta.high <= now && v.slackMs !== undefined)
    return (
      `deadline: ${v.slackMs >= 0 ? 'met' : 'missed'} — due ${zonedText(v.deadline, zone, now)}; ` +
      `finished ${zonedText(v.eta.high, zone, now)} (${slackText(v.slackMs)})`
    );
  const range = `finishes in ${spanText(v.eta.low - now)}–${spanText(v.eta.high - now)}${ahead}`;
  const slack = v.slackMs !== undefined ? ` (${slackText(v.slackMs)})` : '';
  return `deadline: ${v.feasibility} — ${due}; ${range}${slack}${cost}`;
}

/** A verdict as the API, the library and `--json` give it: instants in ISO 8601, the line a person reads. */
export interface DeadlineView {
  feasibility: Feasibility;
  deadline: string;
  eta?: { from: string; to: string; expected: string };
  slackSeconds?: number;
  aheadPlates: number;
  cost?: { low: Money; high: Money };
  knownBy?: string;
  held?: HeldKey[];
  line: string;
}

export function deadlineView(v: DeadlineVerdict, now: number, zone?: string): DeadlineView {
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    feasibility: v.feasibility,
    deadline: iso(v.deadline),
    ...(v.eta ? { eta: { from: iso(v.eta.low), to: iso(v.eta.high), expected: iso(v.eta.expected) } } : {}),
    ...(v.slackMs !== undefined ? { slackSeconds: Math.round(v.slackMs / 1_000) } : {}),
    aheadPlates: v.aheadPlates,
    ...(v.cost ? { cost: v.cost } : {}),
    ...(v.knownBy !== undefined ? { knownBy: v.knownBy } : {}),
    ...(v.held ? { held: v.held.map((k) => ({ ...k })) } : {}),
    line: deadlineLine(v, now, zone),
  };
}

/**
 * A running batch's deadline in `vqb status` and the progress line: "due 18:00 UTC: on time by
 * 12 min (finishes in 40 min–52 min)", or "AT RISK: late by 3 min" when the projected finish passes it.
 */
export function planText(v: DeadlineVerdict, atRisk: boolean, now: number, zone?: string): string {
  if (!v.eta || v.slackMs === undefined) return deadlineLine(v, now, zone);
  if (v.eta.low === v.eta.high && v.eta.high <= now) return deadlineLine(v, now, zone);
  const range = `finishes in ${spanText(v.eta.low - now)}–${spanText(v.eta.high - now)}`;
  return `deadline ${zonedText(v.deadline, zone, now)}: ${atRisk ? 'AT RISK, ' : ''}${slackText(v.slackMs)} (${range})`;
}
