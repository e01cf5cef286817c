// The watches' Redis structures; this module alone reads and writes them (keys in redis/keys.ts).
// A watch lives in its account's slot, like the account's batches: a token of that account finds
// it, any other token does not. Per watch:
//   A:watch:<name>            hash   its settings and state (round numbers, what it waits for, why)
//   A:watch:<name>:plates     zset   the plates watched, by when each was added
//   A:watch:<name>:removed    zset   plates taken off, by when: their history is forgotten later
//   A:watch:<name>:last       hash   plate → its last result, flattened to fields (packed)
//   A:watch:<name>:history    hash   plate → its last few changes (packed; bounded per plate)
//   A:watch:<name>:rounds     hash   round → what the round was (its batch, plates, changes, when)
//   A:watch:<name>:changes:<n> list  round n's changes, one JSON line each
//   A:watch:<name>:close:<n>  string whoever closes round n (a lock that expires)
//   A:watches                 zset   the account's watches by creation
//   G:watches                 zset   every watch (`<account>/<name>`): what the sweep looks at
import { pack, unpack } from '../redis/compact.js';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys, WatchRef } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import type { FieldChange, Flat } from './diff.js';
import type { Window } from './schedule.js';

export type { WatchRef } from '../redis/keys.js';

export type OverlapRule = 'wait' | 'skip';
export type NotifyRule = 'plate' | 'round';
export type ChangesFormat = 'csv' | 'jsonl' | 'xlsx';

/** What a person chose for a watch. */
export interface WatchSpec {
  name: string;
  /** The account it runs on: with a pool, the pool's home key (docs/plans.md). */
  account: string;
  /** A pool of keys whose every key serves its rounds. */
  pool?: string;
  everyMs?: number;
  cron?: string;
  window?: Window;
  overlap: OverlapRule;
  notify: NotifyRule;
  callbackUrl?: string;
  /** Field names or paths left out of the comparison. */
  ignore: string[];
  /** Budget per UTC month, in creates (a money budget is turned into creates at the account's price). */
  perMonth?: number;
  /** The money budget as given, for display. */
  perMonthMoney?: number;
  format: ChangesFormat;
}

/** What the watch is doing now, in one word, and why in words. */
export type WatchState = 'idle' | 'running' | 'overlap' | 'held' | 'window' | 'paused';

export interface Watch extends WatchSpec {
  createdAt: number;
  paused: boolean;
  /** The last round started (0: none yet). */
  round: number;
  /** The round whose batch is not yet compared (undefined: none). */
  open?: number;
  /** A round came due while one was open (overlap `wait`) or was held: it starts when it can. */
  due: boolean;
  state: WatchState;
  reason?: string;
  skipped: number;
  /** The BullMQ job that started the last round (a retried job continues that round). */
  lastJob?: string;
  /** The last round whose results were compared and kept (a close retried after a crash reads them back). */
  compared: number;
  plates: number;
}

export interface RoundRecord {
  round: number;
  batchId: string;
  plates: number;
  startedAt: number;
  /** When the round's results were compared (undefined: still running). */
  closedAt?: number;
  /** Plates with at least one changed field; fields changed. */
  changedPlates?: number;
  changes?: number;
  /** The round recorded only (the first round; or nothing known before). */
  firstRecord?: boolean;
  creates?: number;
  /** Plates that failed in the round (no result to compare: their last known one stands). */
  failed?: number;
  /** Where the changes export was written. */
  export?: string;
}

export interface ChangeLine extends FieldChange {
  round: number;
  plate: string;
  at: string;
}

export interface LastResult {
  round: number;
  at: number;
  fields: Flat;
}

/** A watch's state fields as a caller sets them (`null` removes one). */
export type StateFields = Record<string, string | number | boolean | null>;

function split(fields: StateFields): { put: Record<string, string>; del: string[] } {
  const put: Record<string, string> = {};
  const del: string[] = [];
  for (const [k, v] of Object.entries(fields)) {
    if (v === null) del.push(k);
    else put[k] = typeof v === 'boolean' ? (v ? '1' : '0') : String(v);
  }
  return { put, del };
}

const SPEC_FIELDS = ['everyMs', 'cron', 'window', 'callbackUrl', 'perMonth', 'perMonthMoney', 'pool'] as const;

/** Plates a command: a few thousand arguments, far from any stack or Redis limit. */
const PLATE_CHUNK = 5_000;

export class WatchStore {
  readonly #redis: Scripted<'watch-start'>;
  readonly #keys: VqbKeys;

  constructor(redis: RedisClient, keys: VqbKeys) {
    this.#redis = withScripts(redis, ['watch-start']);
    this.#keys = keys;
  }

  /** Stores a new watch with its plates; false when the account has one of that name. */
  async create(spec: WatchSpec, plates: readonly string[], now: number): Promise<boolean> {
    const ref = { account: spec.account, name: spec.name };
    const fields: Record<string, string> = {
      name: spec.name,
      account: spec.account,
      overlap: spec.overlap,
      notify: spec.notify,
      ignore: JSON.stringify(spec.ignore),
      format: spec.format,
      createdAt: String(now),
      round: '0',
      state: 'idle',
      skipped: '0',
    };
    for (const f of SPEC_FIELDS) {
      const v = spec[f];
      if (v !== undefined) fields[f] = typeof v === 'object' ? JSON.stringify(v) : String(v);
    }
    if ((await this.#redis.hsetnx(this.#keys.watch(ref), 'name', spec.name)) === 0) return false;
    try {
      await this.#redis.hset(this.#keys.watch(ref), fields);
      await this.addPlates(ref, plates, now);
      await this.#redis.zadd(this.#keys.accountWatches(spec.account), now, spec.name);
      await this.#redis.zadd(this.#keys.watches, now, `${spec.account}/${spec.name}`);
    } catch (err) {
      // All or nothing: a watch half made would hold its name with no plates, listed nowhere.
      await this.#redis
        .multi()
        .del(this.#keys.watch(ref), this.#keys.watchPlates(ref), this.#keys.watchRemoved(ref))
        .zrem(this.#keys.accountWatches(spec.account), spec.name)
        .zrem(this.#keys.watches, `${spec.account}/${spec.name}`)
        .exec()
        .catch(() => undefined);
      throw err;
    }
    return true;
  }

  async get(ref: WatchRef): Promise<Watch | undefined> {
    const [h, plates] = await Promise.all([
      this.#redis.hgetall(this.#keys.watch(ref)),
      this.#redis.zcard(this.#keys.watchPlates(ref)),
    ]);
    if (h.name === undefined || h.account === undefined) return undefined;
    const num = (v: string | undefined) => (v === undefined || v === '' ? undefined : Number(v));
    const opt = <K extends string, V>(k: K, v: V | undefined) => (v === undefined ? {} : ({ [k]: v } as Record<K, V>));
    return {
      name: h.name,
      account: h.account,
      ...opt('everyMs', num(h.everyMs)),
      ...opt('cron', h.cron),
      ...opt('window', h.window ? (JSON.parse(h.window) as Window) : undefined),
      overlap: h.overlap === 'skip' ? 'skip' : 'wait',
      notify: h.notify === 'round' ? 'round' : 'plate',
      ...opt('callbackUrl', h.callbackUrl),
      ...opt('pool', h.pool),
      ignore: h.ignore ? (JSON.parse(h.ignore) as string[]) : [],
      ...opt('perMonth', num(h.perMonth)),
      ...opt('perMonthMoney', num(h.perMonthMoney)),
      format: (h.format as ChangesFormat | undefined) ?? 'csv',
      createdAt: Number(h.createdAt ?? 0),
      paused: h.paused === '1',
      round: Number(h.round ?? 0),
      ...opt('open', num(h.open)),
      due: h.due === '1',
      state: (h.state as WatchState | undefined) ?? 'idle',
      ...opt('reason', h.reason || undefined),
      skipped: Number(h.skipped ?? 0),
      ...opt('lastJob', h.lastJob),
      compared: Number(h.compared ?? 0),
      plates,
    };
  }

  /** The account's watches (names), oldest first. */
  async names(account: string): Promise<string[]> {
    return this.#redis.zrange(this.#keys.accountWatches(account), 0, '-1');
  }

  /** Every watch of the deployment. */
  async all(): Promise<WatchRef[]> {
    const ids = await this.#redis.zrange(this.#keys.watches, 0, '-1');
    return ids.map((id) => {
      const cut = id.indexOf('/');
      return { account: id.slice(0, cut), name: id.slice(cut + 1) };
    });
  }

  async plates(ref: WatchRef): Promise<string[]> {
    return this.#redis.zrange(this.#keys.watchPlates(ref), 0, '-1');
  }

  /** Adds plates (a plate added back is no longer "removed"). Returns how many were new. */
  async addPlates(ref: WatchRef, plates: readonly string[], now: number): Promise<number> {
    if (plates.length === 0) return 0;
    // In chunks: one command of 100,000 plates spread as 200,000 arguments overflows the stack.
    let added = 0;
    for (let i = 0; i < plates.length; i += PLATE_CHUNK) {
      const chunk = plates.slice(i, i + PLATE_CHUNK);
      added += Number(await this.#redis.zadd(this.#keys.watchPlates(ref), 'NX', ...chunk.flatMap((p) => [now, p])));
      await this.#redis.zrem(this.#keys.watchRemoved(ref), ...chunk);
    }
    return added;
  }

  /** Takes plates off: not in the next round; their last result and history go after the retention. */
  async removePlates(ref: WatchRef, plates: readonly string[], now: number): Promise<number> {
    let removed = 0;
    for (let i = 0; i < plates.length; i += PLATE_CHUNK) {
      const chunk = plates.slice(i, i + PLATE_CHUNK);
      removed += await this.#redis.zrem(this.#keys.watchPlates(ref), ...chunk);
      await this.#redis.zadd(this.#keys.watchRemoved(ref), ...chunk.flatMap((p) => [now, p]));
    }
    return removed;
  }

  /** Forgets what is known of plates removed before `before`. Returns how many. */
  async forgetRemoved(ref: WatchRef, before: number): Promise<number> {
    const gone = await this.#redis.zrangebyscore(this.#keys.watchRemoved(ref), 0, before);
    if (gone.length === 0) return 0;
    await this.#redis.hdel(this.#keys.watchLast(ref), ...gone);
    await this.#redis.hdel(this.#keys.watchHistory(ref), ...gone);
    await this.#redis.zrem(this.#keys.watchRemoved(ref), ...gone);
    return gone.length;
  }

  /** Sets state fields (`null` removes one). */
  async set(ref: WatchRef, fields: StateFields): Promise<void> {
    const { put, del } = split(fields);
    if (Object.keys(put).length > 0) await this.#redis.hset(this.#keys.watch(ref), put);
    if (del.length > 0) await this.#redis.hdel(this.#keys.watch(ref), ...del);
  }

  /**
   * Starts round `record.round` with its state `fields`, in one step with the check that the watch
   * is not paused and its round is still `after` (what the caller read): false when a pause or
   * another process came first, and nothing is written (watch-start).
   */
  async startRound(ref: WatchRef, after: number, record: RoundRecord, fields: StateFields): Promise<boolean> {
    const { put, del } = split(fields);
    const pairs = Object.entries(put);
    const started = await this.#redis.vqbWatchStart(
      this.#keys.watch(ref),
      this.#keys.watchRounds(ref),
      String(after),
      String(record.round),
      JSON.stringify(record),
      pairs.length,
      ...pairs.flat(),
      ...del,
    );
    return Number(started) === 1;
  }

  async bumpSkipped(ref: WatchRef): Promise<void> {
    await this.#redis.hincrby(this.#keys.watch(ref), 'skipped', 1);
  }

  /** Creates counted against the month (`YYYY-MM`), closed rounds only. */
  async spent(ref: WatchRef, month: string): Promise<number> {
    return Number((await this.#redis.hget(this.#keys.watch(ref), `spend:${month}`)) ?? 0);
  }

  async round(ref: WatchRef, n: number): Promise<RoundRecord | undefined> {
    const raw = await this.#redis.hget(this.#keys.watchRounds(ref), String(n));
    return raw === null ? undefined : (JSON.parse(raw) as RoundRecord);
  }

  async rounds(ref: WatchRef): Promise<RoundRecord[]> {
    const all = await this.#redis.hvals(this.#keys.watchRounds(ref));
    return all.map((r) => JSON.parse(r) as RoundRecord).sort((a, b) => a.round - b.round);
  }

  async putRound(ref: WatchRef, record: RoundRecord): Promise<void> {
    await this.#redis.hset(this.#keys.watchRounds(ref), String(record.round), JSON.stringify(record));
  }

  /** Round n may be closed by the caller (no one else holds it); held for `ttlMs`. */
  async lockClose(ref: WatchRef, n: number, ttlMs: number): Promise<boolean> {
    return (await this.#redis.set(this.#keys.watchClose(ref, n), '1', 'PX', ttlMs, 'NX')) === 'OK';
  }

  async unlockClose(ref: WatchRef, n: number): Promise<void> {
    await this.#redis.del(this.#keys.watchClose(ref, n));
  }

  async lastResults(ref: WatchRef, plates: readonly string[]): Promise<(LastResult | undefined)[]> {
    if (plates.length === 0) return [];
    const raws = await this.#redis.hmgetBuffer(this.#keys.watchLast(ref), ...plates);
    return raws.map((raw) => (raw === null ? undefined : (unpack(raw) as LastResult)));
  }

  /**
   * One round's end for a batch of plates: their new last results, their history (the newest
   * `keep` changes each), the round's change lines, its creates counted against the month, and
   * `compared` = n, in one MULTI: a close retried after a crash finds all of it or none.
   */
  async recordRound(
    ref: WatchRef,
    n: number,
    last: ReadonlyMap<string, LastResult>,
    changes: readonly ChangeLine[],
    keep: number,
    spend: { month: string; creates: number },
  ): Promise<void> {
    const byPlate = new Map<string, ChangeLine[]>();
    for (const c of changes) byPlate.set(c.plate, [...(byPlate.get(c.plate) ?? []), c]);
    const plates = [...byPlate.keys()];
    const histories = plates.length > 0 ? await this.#redis.hmgetBuffer(this.#keys.watchHistory(ref), ...plates) : [];
    const pipe = this.#redis.multi();
    for (const [plate, result] of last) pipe.hset(this.#keys.watchLast(ref), plate, pack(result));
    plates.forEach((plate, i) => {
      const raw = histories[i];
      const old = raw ? (unpack(raw) as { round: number }[]) : [];
      const entry = { round: n, at: byPlate.get(plate)![0]!.at, changes: byPlate.get(plate)!.map(trim) };
      const kept = [...old.filter((h) => h.round !== n), entry].slice(-keep);
      pipe.hset(this.#keys.watchHistory(ref), plate, pack(kept));
    });
    const key = this.#keys.watchChanges(ref, n);
    pipe.del(key);
    for (let i = 0; i < changes.length; i += 500)
      pipe.rpush(key, ...changes.slice(i, i + 500).map((c) => JSON.stringify(c)));
    pipe.hincrby(this.#keys.watch(ref), `spend:${spend.month}`, spend.creates);
    pipe.hset(this.#keys.watch(ref), 'compared', String(n));
    await pipe.exec();
  }

  async changes(ref: WatchRef, n: number): Promise<ChangeLine[]> {
    const lines = await this.#redis.lrange(this.#keys.watchChanges(ref, n), 0, -1);
    return lines.map((l) => JSON.parse(l) as ChangeLine);
  }

  async history(ref: WatchRef, plate: string): Promise<unknown[]> {
    const raw = await this.#redis.hgetBuffer(this.#keys.watchHistory(ref), plate);
    return raw ? (unpack(raw) as unknown[]) : [];
  }

  /** Drops the change lines of rounds older than the newest `keep`. */
  async dropOldChanges(ref: WatchRef, newest: number, keep: number): Promise<void> {
    if (newest - keep < 1) return;
    await this.#redis.del(this.#keys.watchChanges(ref, newest - keep));
  }

  /** Deletes the watch and everything kept for it. */
  async remove(ref: WatchRef): Promise<void> {
    const rounds = await this.rounds(ref);
    await this.#redis.del(
      this.#keys.watch(ref),
      this.#keys.watchPlates(ref),
      this.#keys.watchRemoved(ref),
      this.#keys.watchLast(ref),
      this.#keys.watchHistory(ref),
      this.#keys.watchRounds(ref),
      ...rounds.map((r) => this.#keys.watchChanges(ref, r.round)),
    );
    await this.#redis.zrem(this.#keys.accountWatches(ref.account), ref.name);
    await this.#redis.zrem(this.#keys.watches, `${ref.account}/${ref.name}`);
  }
}

function trim(c: ChangeLine): [string, string, string] {
  return [c.field, c.before, c.after];
}
