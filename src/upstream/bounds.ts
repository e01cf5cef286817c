// The upstream is untrusted input (docs/security.md, "The upstream is untrusted"): every text it
// sends is cut where vqb first builds an error or a reading from it, every number it sends is
// checked against a sane range, and JSON nested past a limit is refused before anything walks it.
// Pure: no I/O.

/** Characters of one upstream text (an error message, a state, a code) kept: a few KB. */
export const MAX_UPSTREAM_TEXT = 2_048;
/** Characters of an upstream code (error.code) or a state kept: codes are words, not stories. */
export const MAX_UPSTREAM_WORD = 256;
/** Characters of a pause message (docs/security.md promises 4 KB for what an account's hold shows). */
export const MAX_PAUSE_MESSAGE = 4_096;
/**
 * The longest wait an upstream hint may ask for: a monthly quota resets within 31 days. A longer
 * Retry-After, retryAfter(Ms) or reset is not a hint vqb can use (it would hold an account past
 * any plan, or past the Date range): it is read as no hint at all.
 */
export const MAX_WAIT_MS = 32 * 24 * 3_600_000;
/** The largest epoch ms a Date can hold (ECMA-262 §21.4.1.22): past it, toISOString throws. */
export const MAX_DATE_MS = 8_640_000_000_000_000;
/** Nesting of a JSON answer vqb accepts: a vehicle record is a few levels deep, 6,000 is an attack. */
export const MAX_JSON_DEPTH = 64;

/** `text` cut to `max` characters, saying how much was left out. */
export function boundText(text: string, max = MAX_UPSTREAM_TEXT): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

/** A wait (ms) an upstream hint asked for, or undefined when it is not one vqb can use. */
export function saneWait(ms: number | undefined): number | undefined {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0 || ms > MAX_WAIT_MS) return undefined;
  return Math.round(ms);
}

/** An epoch ms read back from storage, or undefined when it could not be a date (garbage, 1e+300). */
export function saneTime(ms: number): number | undefined {
  return Number.isFinite(ms) && Math.abs(ms) <= MAX_DATE_MS ? ms : undefined;
}

/**
 * Whether JSON `text` nests deeper than `max` (objects and arrays), counted on the text, so that
 * neither JSON.parse nor any walk after it meets the depth. Brackets inside strings do not count.
 */
export function jsonTooDeep(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/** Whether a parsed value nests deeper than `max`, walked without recursion. */
export function valueTooDeep(value: unknown, max = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > max) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

// C0 controls but tab and newline, DEL, and C1 controls (ESC [ … and the 8-bit CSI, 0x9b).
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Text safe to print on a terminal: control characters (an escape sequence retitles the terminal
 * or clears the screen) written as `\u001b`, visible and harmless.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
