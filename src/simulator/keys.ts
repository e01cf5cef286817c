// The simulator's API keys: who may call, with which permissions, until when. Changed at run time
// through the handle or /__admin, so a test can expire or revoke a key mid-batch.
import { type KeySpec, PERMISSIONS, type Permission, type Plan } from './options.js';

export interface KeyRecord {
  key: string;
  /** Names the key in stats (never the key itself). */
  label: string;
  permissions: ReadonlySet<Permission>;
  /** ms since the epoch; null = never expires. */
  expiresAtMs: number | null;
  revoked: boolean;
  plan: Plan | null;
  /** undefined = use the plan's or the global setting; null = unlimited. */
  rateLimit: string | null | undefined;
  dailyQuota: number | null | undefined;
  /** The key whose limit and quota this one spends (one contract), when not its own. */
  sharesWith: string | undefined;
}

/** What the admin API and `handle.keys.list()` show. */
export interface KeyInfo {
  key: string;
  permissions: Permission[];
  expiresAt: string | null;
  revoked: boolean;
  plan: Plan | null;
  rateLimit?: string | null;
  dailyQuota?: number | null;
  sharesWith?: string;
}

export type KeyCheck =
  | { ok: true; record: KeyRecord }
  | { ok: false; code: 'INVALID_API_KEY' | 'EXPIRED_API_KEY'; message: string };

export function toEpochMs(value: number | string): number {
  const ms = typeof value === 'number' ? value : Date.parse(value);
  if (!Number.isFinite(ms)) throw new RangeError(`not a date: ${String(value)}`);
  return ms;
}

export class KeyStore {
  readonly #keys = new Map<string, KeyRecord>();

  constructor(specs: readonly KeySpec[] = []) {
    for (const spec of specs) this.add(spec);
  }

  /** Adds a key, or replaces one with the same name (un-revoking it). */
  add(spec: KeySpec): KeyInfo {
    const record: KeyRecord = {
      key: spec.key,
      label: spec.label ?? this.#keys.get(spec.key)?.label ?? `key${this.#keys.size + 1}`,
      permissions: new Set(spec.permissions ?? PERMISSIONS),
      expiresAtMs: spec.expiresAt === undefined ? null : toEpochMs(spec.expiresAt),
      revoked: false,
      plan: spec.plan ?? null,
      rateLimit: spec.rateLimit,
      dailyQuota: spec.dailyQuota,
      sharesWith: spec.sharesWith,
    };
    this.#keys.set(spec.key, record);
    return info(record);
  }

  /** Marks the key expired as of `now`; false when the key is unknown. */
  expire(key: string, now: number): boolean {
    const record = this.#keys.get(key);
    if (!record) return false;
    record.expiresAtMs = now;
    return true;
  }

  revoke(key: string): boolean {
    const record = this.#keys.get(key);
    if (!record) return false;
    record.revoked = true;
    return true;
  }

  replaceAll(specs: readonly KeySpec[]): void {
    this.#keys.clear();
    for (const spec of specs) this.add(spec);
  }

  list(): KeyInfo[] {
    return [...this.#keys.values()].map(info);
  }

  get(key: string): KeyRecord | undefined {
    return this.#keys.get(key);
  }

  /** Revoked keys look unknown (401 INVALID_API_KEY), as the provider does not say a key was revoked. */
  check(key: string | undefined, now: number): KeyCheck {
    const record = key === undefined ? undefined : this.#keys.get(key);
    if (!record || record.revoked) {
      return {
        ok: false,
        code: 'INVALID_API_KEY',
        message: key === undefined ? 'Missing API key (x-api-key header).' : 'Invalid API key.',
      };
    }
    if (record.expiresAtMs !== null && record.expiresAtMs <= now) {
      return {
        ok: false,
        code: 'EXPIRED_API_KEY',
        message: `API key expired at ${new Date(record.expiresAtMs).toISOString()}.`,
      };
    }
    return { ok: true, record };
  }
}

function info(record: KeyRecord): KeyInfo {
  const out: KeyInfo = {
    key: record.key,
    permissions: PERMISSIONS.filter((p) => record.permissions.has(p)),
    expiresAt: record.expiresAtMs === null ? null : new Date(record.expiresAtMs).toISOString(),
    revoked: record.revoked,
    plan: record.plan,
  };
  if (record.rateLimit !== undefined) out.rateLimit = record.rateLimit;
  if (record.dailyQuota !== undefined) out.dailyQuota = record.dailyQuota;
  if (record.sharesWith !== undefined) out.sharesWith = record.sharesWith;
  return out;
}
