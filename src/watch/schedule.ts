// When a watch's rounds are due, as pure functions of the text a person gave and of `now`: an
// interval (`--every 7d`), a cron line (`--cron "0 3 * * 1"`, read by cron-parser, the parser
// BullMQ's job schedulers use, so what is accepted here is what fires), and a daily window
// (`--window 22:00-06:00`, UTC) outside which a due round waits for the window to open.
import { CronExpressionParser } from 'cron-parser';
import { InputError } from '../errors.js';
import { parseDuration } from '../setting-values.js';
import { wallClock } from '../time-text.js';

/** A watch's timing as stored: exactly one of `everyMs` and `cron`; `window` optional. */
export interface WatchTiming {
  everyMs?: number;
  cron?: string;
  window?: Window;
}

/** Minutes after UTC midnight; `from` > `to` crosses midnight (nights). */
export interface Window {
  from: number;
  to: number;
}

/** An interval of at least `minMs` (VQ_WATCH_MIN_EVERY: a typo of `7` for `7d` would pay every 7 ms). */
export function parseEvery(text: string, minMs: number): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0)
    throw new InputError('WATCH_BAD_SCHEDULE', `--every ${JSON.stringify(text)}: a duration such as 30m, 12h or 7d`);
  if (ms < minMs)
    throw new InputError(
      'WATCH_BAD_SCHEDULE',
      `--every ${text}: at least ${minMs / 1000}s apart (VQ_WATCH_MIN_EVERY), or every round pays for the whole list`,
    );
  return ms;
}

/** A cron line cron-parser reads (5 fields, or 6 with seconds), with at least `minMs` between its next two times. */
export function checkCron(pattern: string, minMs: number, now: number): string {
  const fields = pattern.trim().split(/\s+/);
  let gap: number;
  try {
    if (fields.length < 5 || fields.length > 6) throw new Error('5 or 6 fields');
    const times = CronExpressionParser.parse(pattern, { currentDate: new Date(now), tz: 'UTC' });
    const first = times.next().getTime();
    gap = times.next().getTime() - first;
  } catch (err) {
    throw new InputError(
      'WATCH_BAD_SCHEDULE',
      `--cron ${JSON.stringify(pattern)}: not a cron line (minute hour day month weekday, e.g. "0 3 * * 1"): ${
        (err as Error).message
      }`,
    );
  }
  if (gap < minMs)
    throw new InputError(
      'WATCH_BAD_SCHEDULE',
      `--cron ${pattern}: rounds ${gap / 1000}s apart, under VQ_WATCH_MIN_EVERY`,
    );
  return fields.join(' ');
}

const CLOCK = /^([01]?\d|2[0-3]):([0-5]\d)$/;

/** `HH:MM-HH:MM` (UTC); the two ends differ. */
export function parseWindow(text: string): Window {
  const [a, b, ...rest] = text.split('-').map((s) => s.trim());
  const from = a !== undefined ? CLOCK.exec(a) : null;
  const to = b !== undefined ? CLOCK.exec(b) : null;
  if (!from || !to || rest.length > 0)
    throw new InputError(
      'WATCH_BAD_SCHEDULE',
      `--window ${JSON.stringify(text)}: HH:MM-HH:MM in UTC, e.g. 22:00-06:00`,
    );
  const window = { from: Number(from[1]) * 60 + Number(from[2]), to: Number(to[1]) * 60 + Number(to[2]) };
  if (window.from === window.to) throw new InputError('WATCH_BAD_SCHEDULE', `--window ${text}: the ends are the same`);
  return window;
}

export function windowText(w: Window): string {
  const hhmm = (m: number) => `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
  return `${hhmm(w.from)}-${hhmm(w.to)}`;
}

const DAY = 86_400_000;

/**
 * The window on the wall clock of `zone` on the UTC day of `now` ("19:00-03:00" for 22:00-06:00
 * in São Paulo): what a person there reads. A zone with summer time shifts it by the hour twice a
 * year; the window itself stays in UTC.
 */
export function windowOnClock(w: Window, zone: string, now: number): string {
  const start = now - (now % DAY) + w.from * 60_000;
  const end = start + ((w.to - w.from + 1_440) % 1_440) * 60_000;
  const hhmm = (at: number) => {
    const [, , , h, m] = wallClock(at, zone);
    return `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}`;
  };
  return `${hhmm(start)}-${hhmm(end)}`;
}

/** Whether `now` is inside the window (its start included, its end not). */
export function windowOpen(w: Window, now: number): boolean {
  const minute = Math.floor((now % DAY) / 60_000);
  return w.from < w.to ? minute >= w.from && minute < w.to : minute >= w.from || minute < w.to;
}

/** When the window next opens at or after `now` (now itself when it is open). */
export function nextOpening(w: Window, now: number): number {
  if (windowOpen(w, now)) return now;
  const midnight = now - (now % DAY);
  const today = midnight + w.from * 60_000;
  return today > now ? today : today + DAY;
}
