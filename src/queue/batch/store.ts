// Batches: what users think in ("this file", "this request"). A batch is a Redis hash of metadata
// and live counts plus the list of its input rows and the hash of its outcomes; its plates wait in
// the scheduler's list until the feeder makes them jobs. Counts move only in Lua scripts or MULTI
// blocks, so they stay exact with many workers and restarts. This folder (queue/batch/) alone
// reads and writes a batch's hash, rows and outcomes. What a batch looks like to its readers
// (counts with its costs and plates in flight, its cap) joins other stores: a query, view.ts.

import { randomBytes } from 'node:crypto';
import { type Clock, clock } from '../../clock.js';
import { BatchAmbiguousError, BatchIdTakenError, BatchNotFoundError, InputError } from '../../errors.js';
import type { BatchKey, BatchRef, VqbKeys } from '../../redis/keys.js';
import { BATCH_ID } from '../../redis/keys.js';
import type { BatchSource } from '../../schemas/batch.js';
import type { ReportedCost } from '../costs.js';

export type { BatchKey } from '../../redis/keys.js';

import type { RedisClient } from '../../redis/connection.js';
import { execAll } from '../../redis/health.js';
import { type Heard, hear, lockWhenFree } from '../../redis/heard.js';
import { type Scripted, withScripts } from '../../redis/scripts.js';
import type { Scheduler } from '../scheduler.js';
import type { PriorityClass } from '../types.js';
import { decodeRow, encodeRow, type IngestRow } from './rows.js';

export { decodeRow, encodeRow, type IngestRow, type StoredRow } from './rows.js';

/** Which door a batch came through (the one list: schemas/batch.ts). */

/**
 * What a batch id may be: what ingest derives (`<name>-<digest>`) and what a caller may name
 * (`batchId`, `--batch-id`). The id is part of Redis key names, so anything else (`x:rows` names
 * another structure of batch `x`) is refused before it reaches a key: not found, or BAD_BATCH_ID.
 * An id is scoped by its account: two accounts may each hold `order-1001`, each its own batch.
 */
export const BATCH_ID_RULE = 'a batch id is 1–100 letters, digits, _ or -';

export function isBatchId(id: string): boolean {
  return BATCH_ID.test(id);
}

export interface StoredCounts {
  /** Input rows read. */
  total: number;
  /** Distinct valid plates put on the queue. */
  enqueued: number;
  /** Enqueued, not started or waiting to be created. */
  queued: number;
  /** Created upstream, not finished. */
  inflight: number;
  done: number;
  failed: number;
  /** Invalid plates, never enqueued. */
  rejected: number;
  /** Rows repeating an earlier plate of the batch, enqueued once. */
  duplicates: number;
  possibleDuplicates: number;
  /** Upstream requests spent: queries created, successful polls, 429s received. */
  creates: number;
  polls: number;
  /** Requests that left and may be billed, whatever came back (creates/polls count the answered ones). */
  createsSent: number;
  pollsSent: number;
  rateLimited: number;
  /** Plates answered from a stored result, free. */
  reused: number;
  /** Of `failed`, plates a cancel dropped: never sent upstream, never charged (absent: none). */
  cancelled?: number;
}

/** Where a batch's plates are scheduled. */
export interface BatchPlacement {
  /** The account whose key and limits the batch uses. */
  account: string;
  /** interactive (a person waits), normal, bulk. */
  priority: PriorityClass;
  /** Share of the account's rate relative to the other batches of its class (default 1). */
  weight: number;
  /** When the batch should be finished, epoch ms (docs/plans.md); unset: none. */
  deadline?: number;
  /**
   * A pooled batch (docs/plans.md): the pool's name and its keys besides `account` (the batch's
   * home, where its keys live), each of which creates its plates as it has room.
   */
  pool?: { name: string; keys: string[] };
}

/** A batch as readers see it: its own hash (StoredBatch) joined with what other stores own of it (view.ts). */
export interface BatchInfo extends Omit<StoredBatch, 'counts'> {
  counts: StoredCounts;
  /** Cap on creates for this batch (unset = none). */
  maxCreates?: number;
  /** Why the batch's creates are held back, when they are ('budget'). */
  /** What the upstream's answers said of their own price (x-query-cost, x-billed), when any did. */
  reported?: ReportedCost;
  blocked?: string;
}

export interface NewBatch extends BatchPlacement {
  id: string;
  source: BatchSource;
  name: string;
  product: string;
  metadata?: Record<string, unknown>;
  extraColumns?: string[];
  reuseWithinMs?: number;
  /**
   * The digest of the batch's content (its rows or file), stored at creation. Opening the id
   * again with another digest is BATCH_ID_TAKEN; without one, nothing is compared.
   */
  digest?: string;
  /** Where the batch's webhooks go, already checked (webhooks/target.ts). */
  callbackUrl?: string;
}

const INGEST_LOCK_MS = 60_000;

/**
 * How long a process trusts what it read of an id's homes. A batch never changes account; the
 * bound covers an id forgotten by retention, or opened by another account, meanwhile (a look-up
 * that misses in the remembered homes reads them again).
 */
const HOME_TTL_MS = 60_000;
const HOMES_KEPT = 10_000;

const COUNT_FIELDS = ['total', 'enqueued', 'done', 'failed', 'rejected', 'duplicates', 'possibleDuplicates'] as const;

/** What a batch's own hash holds; its view (view.ts) adds what other stores own of it. */
export interface StoredBatch extends BatchPlacement {
  id: string;
  source: BatchSource;
  name: string;
  createdAt: number;
  finishedAt?: number;
  sealed: boolean;
  metadata: Record<string, unknown>;
  extraColumns: string[];
  product: string;
  /** The counts the hash keeps (the view adds the costs, the plates in flight and those queued). */
  counts: Record<(typeof COUNT_FIELDS)[number], number> & { cancelled?: number };
  /** Plates with a stored result this recent are answered from it (0 = off). */
  reuseWithinMs: number;
  /** Where the batch's webhooks go (checked by webhooks/target.ts before it was stored). */
  callbackUrl?: string;
  /** Since when its projected finish passes its deadline (the deadline watch), epoch ms; unset: on time or none. */
  atRiskSince?: number;
  /**
   * The name of its exports and archive: its id, or `<id>.<account>` when another account held a
   * batch of that id first (files of two accounts' `order-1001` never meet on disk); unset: its id.
   */
  fileName?: string;
}

/** The name a batch's exports and archive go by (`<id>`, or `<id>.<account>` for an id another account held first). */
export function fileNameOf(batch: { id: string; fileName?: string }): string {
  return batch.fileName ?? batch.id;
}

const idOf = (batch: BatchKey): string => (typeof batch === 'string' ? batch : batch.id);

export class BatchStore {
  readonly #redis: Scripted<'batch-open' | 'batch-seal' | 'batch-home' | 'batch-unhome' | 'lock-release'>;
  readonly #keys: VqbKeys;
  readonly #now: () => number;
  readonly #clock: Pick<Clock, 'now' | 'sleep'>;
  /** Batch id → the accounts holding it and until when that is trusted (a read saved per request). */
  readonly #homes = new Map<string, { accounts: string[]; until: number }>();

  constructor(redis: RedisClient, keys: VqbKeys, time: Pick<Clock, 'now' | 'sleep'> = clock) {
    this.#redis = withScripts(redis, ['batch-open', 'batch-seal', 'batch-home', 'batch-unhome', 'lock-release']);
    this.#keys = keys;
    this.#now = () => time.now();
    this.#clock = time;
  }

  /**
   * The batch with the account whose slot holds its keys; undefined for an id no batch has. With
   * `accounts` (a token's scope), only a batch of one of them is found: another account's batch of
   * the same id is not found, as if absent. Without, an id several accounts hold is
   * BatchAmbiguousError (say which account). A ref is taken as it is (its account is known).
   */
  async find(key: BatchKey, accounts?: readonly string[]): Promise<BatchRef | undefined> {
    if (typeof key !== 'string') {
      if (!isBatchId(key.id) || (accounts !== undefined && !accounts.includes(key.account))) return undefined;
      return key;
    }
    if (!isBatchId(key)) return undefined;
    const known = this.#homes.get(key);
    let homes = known && known.until > this.#now() ? known.accounts : undefined;
    // A remembered list that misses the account asked for may be older than its batch: read again.
    if (homes === undefined || (accounts !== undefined && !homes.some((a) => accounts.includes(a)))) {
      const raw = await this.#redis.hget(this.#keys.batchAccounts, key);
      homes = raw === null ? [] : raw.split(' ').filter((a) => a !== '');
      this.#remember(key, homes);
    }
    const mine = accounts === undefined ? homes : homes.filter((a) => accounts.includes(a));
    if (mine.length === 0) return undefined;
    if (mine.length > 1) throw new BatchAmbiguousError(key, mine);
    return { id: key, account: mine[0]! };
  }

  /** As find, but a batch that does not exist is BatchNotFoundError. */
  async ref(key: BatchKey, accounts?: readonly string[]): Promise<BatchRef> {
    if (typeof key !== 'string') return key;
    const ref = await this.find(key, accounts);
    if (!ref) throw new BatchNotFoundError(key);
    return ref;
  }

  #remember(batchId: string, accounts: string[]): void {
    if (this.#homes.size >= HOMES_KEPT) this.#homes.delete(this.#homes.keys().next().value!);
    this.#homes.set(batchId, { accounts, until: this.#now() + HOME_TTL_MS });
  }

  /**
   * Creates the batch, or finds the one with this id (same input → same batch, nothing paid twice).
   * Throws BatchIdTakenError when the batch was created from other content (both digests known).
   * A new batch's cap is the budget's (Budget.setMaxCreates), its view the query's (view.ts).
   */
  async open(batch: NewBatch): Promise<{ created: boolean }> {
    if (!isBatchId(batch.id)) throw new InputError('BAD_BATCH_ID', `${BATCH_ID_RULE}; got ${JSON.stringify(batch.id)}`);
    // The home first: a batch is found from it. The id is the account's own: another account's
    // batch of the same id is neither found, nor changed, nor told of (never BATCH_ID_TAKEN).
    const before = String(await this.#redis.vqbBatchHome(this.#keys.batchAccounts, batch.id, batch.account));
    const others = before.split(' ').filter((a) => a !== '' && a !== batch.account);
    this.#homes.delete(batch.id);
    const ref = { id: batch.id, account: batch.account };
    const key = this.#keys.batch(ref);
    const createdAt = this.#now();
    const [flag, stored] = (await this.#redis.vqbBatchOpen(key, createdAt, batch.digest ?? '')) as [number, string];
    const created = Number(flag) === 1;
    if (!created && batch.digest !== undefined && stored !== '' && stored !== batch.digest)
      throw new BatchIdTakenError(batch.id);
    // An id derived from the content (`<name>-<digest>`, not forced) is where that content goes
    // next, through any door (byContent); a batch made before this index joins it when resumed.
    if (batch.digest !== undefined && batch.id.endsWith(`-${batch.digest.slice(0, 12)}`))
      await this.#redis.set(this.#keys.batchContent(batch.account, batch.digest), batch.id);
    if (created) {
      await this.#redis.hset(key, {
        id: batch.id,
        account: batch.account,
        priority: batch.priority,
        weight: String(batch.weight),
        source: batch.source,
        name: batch.name,
        product: batch.product,
        metadata: JSON.stringify(batch.metadata ?? {}),
        extraColumns: JSON.stringify(batch.extraColumns ?? []),
        ingestedRows: '0',
        reuseWithinMs: String(batch.reuseWithinMs ?? 0),
        ...(batch.deadline !== undefined ? { deadline: String(batch.deadline) } : {}),
        ...(batch.callbackUrl !== undefined ? { callbackUrl: batch.callbackUrl } : {}),
        ...(others.length > 0 ? { fileName: `${batch.id}.${batch.account}` } : {}),
        ...(batch.pool !== undefined ? { pool: batch.pool.name, poolKeys: batch.pool.keys.join(' ') } : {}),
      });
      // The lists (the global one in its own slot, the account's in its) after the batch's hash: a
      // listed batch always has one.
      await this.#redis.zadd(this.#keys.batches, createdAt, batch.id);
      await this.#redis.zadd(this.#keys.accountBatches(batch.account), createdAt, batch.id);
    }
    return { created };
  }

  /**
   * One ingest of a batch at a time, across processes: two producers given the same content at
   * once (two API servers, a retried request) must not both store its rows. A crashed holder's
   * lock expires after INGEST_LOCK_MS; the next ingest then resumes from its rows.
   */
  async lockIngest(
    batch: BatchKey,
    onWait?: (expiresInMs: number) => void,
  ): Promise<{ refresh(): Promise<void>; release(): Promise<void> }> {
    const key = this.#keys.ingestLock(await this.ref(batch));
    const token = randomBytes(8).toString('hex');
    // The holder's release is a message (the lock's key on ingestUnlocked); a holder that died is
    // its lock's expiry.
    await lockWhenFree(
      this.#redis,
      { key, token, ms: INGEST_LOCK_MS },
      { channel: this.#keys.ingestUnlocked, matches: (released) => released === key },
      this.#clock,
      onWait ? { onWait } : {},
    );
    return {
      refresh: async () => {
        await this.#redis.pexpire(key, INGEST_LOCK_MS);
      },
      release: async () => {
        await this.#redis.vqbLockRelease(key, token, this.#keys.ingestUnlocked);
      },
    };
  }

  /**
   * The batch's finish, heard (lua/includes/batch-finish.lua publishes it) for as long as someone
   * waits for it (the library's batch.done()): close it after.
   */
  async finishes(batch: BatchKey): Promise<Heard> {
    return hear(this.#redis, this.#keys.batchFinished(await this.ref(batch)), this.#clock);
  }

  /** Plates with a stored result this recent are answered from it (0: reuse is off for the batch). */
  async reuseWindow(batch: BatchKey): Promise<number> {
    return Number((await this.#redis.hget(this.#keys.batch(await this.ref(batch)), 'reuseWithinMs')) ?? 0);
  }

  /** Rows already ingested: a restarted ingest skips them (their jobs and counts exist). */
  async ingestedRows(batch: BatchKey): Promise<number> {
    return Number((await this.#redis.hget(this.#keys.batch(await this.ref(batch)), 'ingestedRows')) ?? 0);
  }

  /**
   * Stores a chunk of rows, moves the counts and the ingest position, and hands its new plates to
   * the scheduler (which writes its own lists into the same MULTI), all in one MULTI: Redis runs
   * all of it or, when full (maxmemory reached under
   * noeviction), refuses the whole transaction at EXEC, so no plate waits whose row and count
   * were never stored. A refused chunk throws RedisFullError; the same ingest run again resumes
   * from the position stored with the last chunk that was written.
   */
  async addRows(
    batch: Pick<BatchInfo, 'id' | 'account' | 'priority' | 'weight' | 'deadline' | 'pool'>,
    rows: readonly IngestRow[],
    scheduler: Pick<Scheduler, 'pushIn' | 'announce'>,
  ): Promise<void> {
    if (rows.length === 0) return;
    const queued = rows.filter((r) => r.kind === 'queued');
    const key = this.#keys.batch(batch);
    const multi = this.#redis.multi().rpush(this.#keys.rows(batch), ...rows.map(encodeRow));
    multi.hincrby(key, 'total', rows.length);
    multi.hincrby(key, 'ingestedRows', rows.length);
    if (queued.length > 0) multi.hincrby(key, 'enqueued', queued.length);
    const duplicates = rows.filter((r) => r.kind === 'duplicate').length;
    const rejected = rows.length - queued.length - duplicates;
    if (rejected > 0) multi.hincrby(key, 'rejected', rejected);
    if (duplicates > 0) multi.hincrby(key, 'duplicates', duplicates);
    scheduler.pushIn(
      multi,
      batch.account,
      batch.id,
      batch.priority,
      batch.weight,
      queued.map((r) => r.plate),
      batch.deadline,
      batch.pool?.keys ?? [],
    );
    await execAll(multi, `storing rows ${rows[0]!.row}–${rows.at(-1)!.row} of batch ${batch.id}`);
    if (queued.length > 0)
      for (const account of [batch.account, ...(batch.pool?.keys ?? [])]) await scheduler.announce(account);
  }

  /** Extra input columns can grow while a CSV is read; the final list is stored when ingest ends. */
  async setExtraColumns(batch: BatchKey, columns: readonly string[]): Promise<void> {
    await this.#redis.hset(this.#keys.batch(await this.ref(batch)), 'extraColumns', JSON.stringify(columns));
  }

  /** All rows are in: from now on the last outcome marks the batch finished. True if it already is. */
  async seal(batch: BatchKey): Promise<boolean> {
    const key = this.#keys.batch(await this.ref(batch));
    const result = Number(await this.#redis.vqbBatchSeal(key, this.#now()));
    if (result === -1) throw new BatchNotFoundError(idOf(batch));
    return result === 2 || Boolean(await this.#redis.hget(key, 'finishedAt'));
  }

  /**
   * The deadline watch found the batch's projected finish past its deadline (`at`) or back in time
   * (undefined). True only for the call that changed it: of many processes that notice the same
   * turn, one tells (its webhook is sent once).
   */
  async markAtRisk(batch: BatchRef, at: number | undefined): Promise<boolean> {
    const key = this.#keys.batch(batch);
    if (at !== undefined) return (await this.#redis.hsetnx(key, 'atRiskSince', String(at))) === 1;
    return (await this.#redis.hdel(key, 'atRiskSince')) === 1;
  }

  /** A new callbackUrl for an existing batch (`vqb run --notify` resuming it), already checked. */
  async setCallbackUrl(batch: BatchKey, url: string): Promise<void> {
    if (!(await this.exists(batch))) throw new BatchNotFoundError(idOf(batch));
    await this.#redis.hset(this.#keys.batch(await this.ref(batch)), 'callbackUrl', url);
  }

  /** Throws BatchIdTakenError when the batch was created from content with another digest (as open does). */
  async assertContent(batch: BatchKey, digest: string): Promise<void> {
    const ref = await this.find(batch);
    if (!ref) return;
    const stored = await this.#redis.hget(this.#keys.batch(ref), 'digest');
    if (stored !== null && stored !== '' && stored !== digest) throw new BatchIdTakenError(idOf(batch));
  }

  async exists(batch: BatchKey): Promise<boolean> {
    const ref = await this.find(batch);
    return ref !== undefined && (await this.#redis.exists(this.#keys.batch(ref))) === 1;
  }

  /** What the batch's hash holds; BatchNotFoundError when there is no such batch. */
  async read(batch: BatchKey): Promise<StoredBatch> {
    const ref = await this.ref(batch);
    const f = await this.#redis.hgetall(this.#keys.batch(ref));
    if (!f.createdAt) throw new BatchNotFoundError(idOf(batch));
    const n = (name: string): number => Number(f[name] ?? 0);
    return {
      id: f.id ?? ref.id,
      account: ref.account,
      priority: (f.priority ?? 'normal') as PriorityClass,
      weight: Number(f.weight ?? 1) || 1,
      ...(f.deadline ? { deadline: n('deadline') } : {}),
      source: (f.source ?? 'library') as BatchSource,
      name: f.name ?? ref.id,
      createdAt: n('createdAt'),
      ...(f.finishedAt ? { finishedAt: n('finishedAt') } : {}),
      sealed: f.sealed === '1',
      metadata: JSON.parse(f.metadata ?? '{}') as Record<string, unknown>,
      extraColumns: JSON.parse(f.extraColumns ?? '[]') as string[],
      product: f.product ?? 'agregados',
      counts: {
        ...(Object.fromEntries(COUNT_FIELDS.map((name) => [name, n(name)])) as StoredBatch['counts']),
        ...(f.cancelled ? { cancelled: n('cancelled') } : {}),
      },
      reuseWithinMs: n('reuseWithinMs'),
      ...(f.callbackUrl ? { callbackUrl: f.callbackUrl } : {}),
      ...(f.atRiskSince ? { atRiskSince: n('atRiskSince') } : {}),
      ...(f.fileName ? { fileName: f.fileName } : {}),
      ...(f.pool ? { pool: { name: f.pool, keys: (f.poolKeys ?? '').split(' ').filter((k) => k !== '') } } : {}),
    };
  }

  /**
   * Batches, newest first; with `accounts`, only those of these accounts, read from each account's
   * own list (a token's page costs its own batches, not every batch in Redis).
   */
  async refs(offset = 0, limit = 20, accounts?: readonly string[]): Promise<{ total: number; refs: BatchRef[] }> {
    if (accounts === undefined) {
      const [total, ids] = await Promise.all([
        this.#redis.zcard(this.#keys.batches),
        this.#redis.zrevrange(this.#keys.batches, offset, offset + limit - 1),
      ]);
      return { total, refs: await this.#expand(ids) };
    }
    // Each account's newest offset + limit, merged by creation time: the page is among them.
    const lists = await Promise.all(
      accounts.map(async (account) => {
        const key = this.#keys.accountBatches(account);
        const [count, flat] = await Promise.all([
          this.#redis.zcard(key),
          this.#redis.zrevrange(key, 0, offset + limit - 1, 'WITHSCORES'),
        ]);
        const entries: { ref: BatchRef; at: number }[] = [];
        for (let i = 0; i + 1 < flat.length; i += 2)
          entries.push({ ref: { id: flat[i]!, account }, at: Number(flat[i + 1]) });
        return { count, entries };
      }),
    );
    const merged = lists.flatMap((l) => l.entries).sort((x, y) => y.at - x.at);
    return {
      total: lists.reduce((sum, l) => sum + l.count, 0),
      refs: merged.slice(offset, offset + limit).map((e) => e.ref),
    };
  }

  /**
   * Batches whose id or name holds `text` (case and accents aside), newest first, at most `limit`;
   * with `accounts`, only theirs. Looks at the newest `upTo` batches only, their names read a page
   * at a time in one round trip each, so a search costs a bounded read however many batches Redis
   * holds. `searched`: how many batches it looked at, of `total`.
   */
  async search(
    text: string,
    limit: number,
    accounts?: readonly string[],
    upTo = 5_000,
  ): Promise<{ refs: BatchRef[]; searched: number; total: number }> {
    const fold = (v: string) => v.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();
    const wanted = fold(text);
    const { total, refs } = await this.refs(0, upTo, accounts);
    const found: BatchRef[] = [];
    let searched = 0;
    for (let i = 0; i < refs.length && found.length < limit; i += 500) {
      const page = refs.slice(i, i + 500);
      // Sent together (one round trip), each on its own slot: a Cluster spreads the accounts.
      const names = await Promise.all(page.map((ref) => this.#redis.hget(this.#keys.batch(ref), 'name')));
      for (const [j, ref] of page.entries()) {
        searched++;
        if (fold(ref.id).includes(wanted) || fold(names[j] ?? '').includes(wanted)) found.push(ref);
        if (found.length >= limit) break;
      }
    }
    return { refs: found, searched, total };
  }

  /**
   * Batches stored before each account kept a list of its own (G:batches only) are added to their
   * accounts' lists, once per deployment: afterwards one GET. Returns how many were added.
   */
  async ensureAccountLists(): Promise<number> {
    if ((await this.#redis.get(this.#keys.batchListsIndexed)) === '1') return 0;
    let added = 0;
    let cursor = '0';
    do {
      const [next, flat] = await this.#redis.zscan(this.#keys.batches, cursor, 'COUNT', 500);
      cursor = next;
      const at = new Map<string, number>();
      for (let i = 0; i + 1 < flat.length; i += 2) at.set(flat[i]!, Number(flat[i + 1]));
      for (const ref of await this.#expand([...at.keys()])) {
        added += Number(await this.#redis.zadd(this.#keys.accountBatches(ref.account), 'NX', at.get(ref.id)!, ref.id));
      }
    } while (cursor !== '0');
    await this.#redis.set(this.#keys.batchListsIndexed, '1');
    return added;
  }

  /** Each id with every account that holds it (an id two accounts hold is two batches). */
  async #expand(ids: readonly string[]): Promise<BatchRef[]> {
    if (ids.length === 0) return [];
    const homes: (string | null)[] = await this.#redis.hmget(this.#keys.batchAccounts, ...ids);
    return ids.flatMap((id, i) =>
      (homes[i] ?? 'default')
        .split(' ')
        .filter((a) => a !== '')
        .map((account) => ({ id, account })),
    );
  }

  /** The batch's rows in input order, read in chunks (bounded memory for a million rows). */
  async *rows(batch: BatchKey, chunk = 1_000): AsyncIterable<IngestRow> {
    const ref = await this.find(batch);
    if (!ref) return;
    const key = this.#keys.rows(ref);
    for (let start = 0; ; start += chunk) {
      const raws = await this.#redis.lrange(key, start, start + chunk - 1);
      for (const raw of raws) yield decodeRow(raw);
      if (raws.length < chunk) return;
    }
  }

  // --- retention (retention.ts orchestrates; each owner forgets its own keys)

  /** Every stored batch with what retention needs to decide: when it finished, and whether a delete was asked. */
  async retentionCandidates(): Promise<
    { id: string; account: string; finishedAt?: number; deleteRequested: boolean }[]
  > {
    const refs = await this.#expand(await this.#redis.zrange(this.#keys.batches, 0, '-1'));
    const fields = await Promise.all(
      refs.map((ref) => this.#redis.hmget(this.#keys.batch(ref), 'finishedAt', 'deleteRequested')),
    );
    return refs.map((ref, i) => {
      const [finishedAt, deleteRequested] = fields[i] ?? [];
      return {
        ...ref,
        ...(finishedAt ? { finishedAt: Number(finishedAt) } : {}),
        deleteRequested: deleteRequested === '1',
      };
    });
  }

  /** Plates a cancel dropped, counted apart from the failures (they were never sent). */
  async countCancelled(batch: BatchKey, n: number): Promise<void> {
    if (n > 0) await this.#redis.hincrby(this.#keys.batch(await this.ref(batch)), 'cancelled', n);
  }

  /** A delete was asked while plates were still running (`--cancel`): the sweep archives the batch once it finishes. */
  async requestDelete(batch: BatchKey): Promise<void> {
    await this.#redis.hset(this.#keys.batch(await this.ref(batch)), 'deleteRequested', '1');
  }

  /**
   * The id of the account's batch made from content with this sha256 (a file's bytes, a list's
   * rows), whichever door it came through: the same content again resumes it (issue 36: the file a
   * user ran with `vqb run` and then sent to POST /v1/batches was paid for twice).
   */
  async byContent(account: string, digest: string): Promise<string | undefined> {
    return (await this.#redis.get(this.#keys.batchContent(account, digest))) ?? undefined;
  }

  /**
   * Removes the batch's hash, rows, ingest lock and its entry in the list of batches (its outcomes:
   * OutcomeStore.forget).
   */
  async forget(batch: BatchKey): Promise<void> {
    const ref = await this.find(batch);
    if (!ref) return;
    const digest = await this.#redis.hget(this.#keys.batch(ref), 'digest');
    if (digest) {
      const content = this.#keys.batchContent(ref.account, digest);
      if ((await this.#redis.get(content)) === ref.id) await this.#redis.del(content);
    }
    await this.#redis.del(this.#keys.batch(ref), this.#keys.rows(ref), this.#keys.ingestLock(ref));
    // The lists last: a batch half forgotten is still listed, and the next sweep finishes it.
    await this.#redis.zrem(this.#keys.accountBatches(ref.account), ref.id);
    await this.#redis.vqbBatchUnhome(this.#keys.batchAccounts, this.#keys.batches, ref.id, ref.account);
    this.#homes.delete(ref.id);
  }

  /** Roughly what the batch's hash, rows and outcomes take in Redis (MEMORY USAGE, sampled: cheap, an estimate). */
  async memoryUsage(batch: BatchKey): Promise<number> {
    const ref = await this.find(batch);
    if (!ref) return 0;
    const keys = [this.#keys.batch(ref), this.#keys.rows(ref), this.#keys.outcomes(ref)];
    const sizes = await Promise.all(keys.map((key) => this.#redis.memory('USAGE', key) as Promise<number | null>));
    return sizes.reduce<number>((sum, n) => sum + Number(n ?? 0), 0);
  }
}
