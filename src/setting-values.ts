// Values a setting is written in, parsed: a secret that never prints, a request rate, a duration.
// A leaf module (it imports nothing of ours), so config.ts, accounts.ts and the Redis settings can
// all use it without importing each other.

/** The API key, wrapped so that logging or serialising a Config can never print it. */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toJSON(): string {
    return '[redacted]';
  }

  toString(): string {
    return '[redacted]';
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return 'Secret([redacted])';
  }
}

/** Where the upstream key comes from. A file is re-read when it changes, so a key can be rotated without a restart. */
export type ApiKeySource = { kind: 'inline'; secret: Secret } | { kind: 'file'; path: string };

/** Service tokens for our own HTTP API: never the upstream key. */
export type TokenSource = { kind: 'inline'; secrets: Secret[] } | { kind: 'file'; path: string };

export interface RateLimit {
  /**
   * For a configured rate, the exact limit; for `auto`, the rate it starts from until it learns
   * (1/s unless `start=` says).
   */
  max: number;
  durationMs: number;
  /** As the user wrote it, for messages. */
  text: string;
  /** `auto`: the rate in force is learned from the upstream's answers (queue/line.ts), never above the ceiling. */
  auto?: { ceilingPerSecond?: number };
}

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  sec: 1_000,
  m: 60_000,
  min: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
};

/**
 * Parses `60/min`, `5/s`, `300/m`, `10/2s`, `1000/day`, and `auto` (learn it from the upstream),
 * which may take a ceiling and a start: `auto<=300/min`, `auto,start=2/s`, `auto<=20/s,start=5/s`.
 */
export function parseRateLimit(text: string): RateLimit | undefined {
  const auto = /^\s*auto\s*(?:<=\s*([^,\s]+))?\s*(?:,\s*start\s*=\s*(\S+))?\s*$/i.exec(text);
  if (auto) {
    const ceiling = auto[1] !== undefined ? parseFixedRate(auto[1]) : undefined;
    const start = auto[2] !== undefined ? parseFixedRate(auto[2]) : { max: 1, durationMs: 1_000, text: '1/s' };
    if ((auto[1] !== undefined && !ceiling) || !start) return undefined;
    const ceilingPerSecond = ceiling ? (ceiling.max * 1_000) / ceiling.durationMs : undefined;
    // Never start above the ceiling.
    const capped =
      ceilingPerSecond !== undefined && (start.max * 1_000) / start.durationMs > ceilingPerSecond ? ceiling! : start;
    return {
      max: capped.max,
      durationMs: capped.durationMs,
      text: text.trim(),
      auto: ceilingPerSecond !== undefined ? { ceilingPerSecond } : {},
    };
  }
  return parseFixedRate(text);
}

function parseFixedRate(text: string): RateLimit | undefined {
  const match = /^\s*(\d+)\s*\/\s*(\d*)\s*([a-z]+)\s*$/i.exec(text);
  if (!match) return undefined;
  const max = Number(match[1]);
  const count = match[2] ? Number(match[2]) : 1;
  const unit = UNIT_MS[match[3]!.toLowerCase()];
  if (!unit || max <= 0 || count <= 0) return undefined;
  return { max, durationMs: count * unit, text: text.trim() };
}

/** Parses `90`, `90s`, `5m`, `24h`, `7d` into milliseconds (a bare number is milliseconds). */
export function parseDuration(text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(text);
  if (!match) return undefined;
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(match[2] ?? 'ms').toLowerCase() as 'ms'];
  return Math.round(Number(match[1]) * unit);
}
