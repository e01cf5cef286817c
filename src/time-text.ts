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

/** "2026-11-24 22:03 UTC (3 min ago)". */
export function whenText(at: number, now: number): string {
  return `${dateText(at, now)} (${relativeText(at, now)})`;
}
