// Durations and instants as a person reads them in a terminal, a log message or a webhook's text:
// "45 s", "12 min", "2 h 5 min", "30 days"; "2026-11-24 22:03 UTC (3 min ago)". Machine-readable
// fields (JSON, the API, the exports) keep ISO 8601 and milliseconds; this is for the words.

const S = 1_000;
const MIN = 60 * S;
const H = 60 * MIN;
const DAY = 24 * H;

/** A length of time, rounded to what matters at its size: "45 s", "2 min 5 s", "12 min", "2 h 5 min", "3 days 4 h". */
export function spanText(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '?';
  if (ms < MIN) return `${Math.round(ms / S)} s`;
  if (ms < 10 * MIN) {
    const s = Math.round(ms / S);
    const rest = s % 60;
    return rest === 0 ? `${Math.floor(s / 60)} min` : `${Math.floor(s / 60)} min ${rest} s`;
  }
  if (ms < H) return `${Math.round(ms / MIN)} min`;
  if (ms < 2 * DAY) {
    const m = Math.round(ms / MIN);
    const rest = m % 60;
    return rest === 0 ? `${Math.floor(m / 60)} h` : `${Math.floor(m / 60)} h ${rest} min`;
  }
  const h = Math.round(ms / H);
  const days = Math.floor(h / 24);
  const rest = h % 24;
  const word = days === 1 ? 'day' : 'days';
  return rest === 0 || days >= 10 ? `${days} ${word}` : `${days} ${word} ${rest} h`;
}

/** How long ago (or how far ahead) an instant is: "3 min ago", "in 2 h 5 min", "just now". */
export function relativeText(at: number, now: number): string {
  const delta = at - now;
  if (Math.abs(delta) < 1_500) return 'just now';
  return delta < 0 ? `${spanText(-delta)} ago` : `in ${spanText(delta)}`;
}

/** An instant in UTC to the minute (seconds when it is near): "2026-11-24 22:03 UTC". */
export function dateText(at: number, now?: number): string {
  const iso = new Date(at).toISOString();
  const near = now !== undefined && Math.abs(at - now) < H;
  return `${iso.slice(0, 10)} ${iso.slice(11, near ? 19 : 16)} UTC`;
}

/** "2026-11-24 22:03 UTC (3 min ago)"; on the wall clock of `zone` when one is given (zonedText). */
export function whenText(at: number, now: number, zone?: string): string {
  return `${zonedText(at, zone, now)} (${relativeText(at, now)})`;
}

/**
 * Wall clocks in a time zone (VQ_TIME_ZONE, an IANA name such as America/Sao_Paulo): what a person
 * means by "18:00" is their clock's, not the server's (a container runs in UTC: 18:00 there is
 * 15:00 in São Paulo).
 */
const WALL = new Map<string, Intl.DateTimeFormat>();

function wallFormat(zone: string): Intl.DateTimeFormat {
  let format = WALL.get(zone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    WALL.set(zone, format);
  }
  return format;
}

/** The wall clock in `zone` at `at`: [year, month 1-12, day, hour, minute, second]. */
export function wallClock(at: number, zone: string): [number, number, number, number, number, number] {
  const parts: Record<string, number> = {};
  for (const p of wallFormat(zone).formatToParts(at)) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return [parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!, parts.second!];
}

/** The instant a wall-clock time in `zone` names (month 1-12; a day past the month's end rolls over). */
export function zonedInstant(zone: string, y: number, mo: number, d: number, h: number, m: number, s: number): number {
  const wall = Date.UTC(y, mo - 1, d, h, m, s);
  const offsetAt = (at: number) => {
    const [yy, mm, dd, hh, mi, ss] = wallClock(at, zone);
    return Date.UTC(yy, mm - 1, dd, hh, mi, ss) - Math.floor(at / 1_000) * 1_000;
  };
  const first = wall - offsetAt(wall);
  // Twice: across a change of the zone's offset the first guess is an hour off.
  return wall - offsetAt(first);
}

/** The process's own zone (TZ), where no VQ_TIME_ZONE is handed in. */
export function localZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** Whether `zone` is an IANA time zone this Node knows. */
export function isTimeZone(zone: string): boolean {
  try {
    wallFormat(zone);
    return true;
  } catch {
    return false;
  }
}

/** An instant on the wall clock of `zone`, to the minute: "2026-11-27 18:00 America/Sao_Paulo"; UTC as dateText. */
export function zonedText(at: number, zone: string | undefined, now?: number): string {
  if (zone === undefined || zone === 'UTC' || zone === 'Etc/UTC') return dateText(at, now);
  const [y, mo, d, h, m, s] = wallClock(at, zone);
  const two = (n: number) => String(n).padStart(2, '0');
  const near = now !== undefined && Math.abs(at - now) < H;
  return `${y}-${two(mo)}-${two(d)} ${two(h)}:${two(m)}${near ? `:${two(s)}` : ''} ${zone}`;
}
