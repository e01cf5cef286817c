// Migration 1, run by `vqb migrate` (never at a start): moves a deployment's data from the old key
// layout (every key under the prefix's one hash tag: `<prefix>:<queue>:vqb:…` and
// `<prefix>:<queue>.<account>:…`) to the current one (each account's keys in its own slot,
// `<bare>:{<queue>.<account>}:…`; see keys.ts), once per deployment; a start only checks it
// (checkLayout). This module is the one owner of `G:layout` (and of its lock): it
// says which layout the data is in, and only this module writes it.
//
// Every key is copied with DUMP/RESTORE (RENAME cannot cross slots on a Cluster) and the old key
// deleted only once its copy is stored, so a migration cut off anywhere is resumed by the next
// `vqb migrate`: a new key that already exists is the copy an earlier run made, and wins.

import { randomBytes } from 'node:crypto';
import { Cluster, type Redis } from 'ioredis';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import { VqbError } from '../errors.js';
import type { Logger } from '../logger.js';
import { connectRedis, type RedisClient, serversOf } from './connection.js';
import { lockWhenFree } from './heard.js';
import { ACCOUNT_ID, accountQueueName, BATCH_ID, type BatchRef, PRIORITY_CLASSES, VqbKeys } from './keys.js';
import { withScripts } from './scripts.js';

/** The value of `G:layout` once the data is in the layout of keys.ts. */
const CURRENT = '2';
/** Keys per round trip: a few hundred keeps a round trip short while millions of keys move. */
const CHUNK = 200;
/** Payload bytes per DUMP round at most (one bigger key goes alone): a batch's rows or outcomes may be tens of MB. */
const ROUND_BYTES = 32 * 1024 * 1024;
/** A batch hash without an `account` field is from before accounts: it belonged to this one. */
const DEFAULT_ACCOUNT = 'default';
/**
 * Batch id → account answers kept in memory, cleared when full (the memory stays bounded; Redis
 * keeps the answer too).
 */
const BATCH_CACHE_MAX = 50_000;
const PROGRESS_EVERY_MS = 10_000;

export interface LayoutOptions {
  /** How long the migration lock lives without a refresh (refreshed every third of it). */
  lockMs?: number;
  /** How long a process waits for another one's migration before it gives up and throws. */
  waitMs?: number;
}

export interface LayoutResult {
  /** Old keys this call moved to their new names (a split hash or the active set counts as one). */
  moved: number;
  /**
   * True when this call found nothing to do: the data was in the current layout already, or another
   * process moved it while this one waited.
   */
  alreadyCurrent: boolean;
}

type Log = (msg: string, fields?: object) => void;
type Arg = string | number | Buffer;
type Reply = [Error | null, unknown];
interface Command {
  args: [string, ...Arg[]];
  /** Reply as a Buffer (DUMP payloads are binary). */
  buffer?: boolean;
}

const cmd = (...args: [string, ...Arg[]]): Command => ({ args });

/** Where an old key goes: a fixed name, a name that needs its batch's account, or nowhere. */
type Route =
  | { kind: 'to'; to: string }
  | { kind: 'batch'; batch: string; to: (b: BatchRef) => string }
  /**
   * `G:sched:pending:<x>` where `<x>` is also a class name: the key's type says which (a pending
   * list, or a zset of an account named `pending`).
   */
  | { kind: 'byType'; list: Route; zset: Route }
  /** Rebuilt field by field after the scan (G:sched:weights, G:sched:active). */
  | { kind: 'special' }
  | { kind: 'stay' };

interface Move {
  from: string;
  to: string;
}

/**
 * At every start, before anything else touches a vqb key: the data must be in the current key
 * layout. The common case is one GET. A Redis that holds nothing of vqb is marked current at
 * once; one that holds data of vqb 0.1.0 (the single-slot layout), or a migration cut off, is
 * LAYOUT_MIGRATION_NEEDED: a start never moves data (issue 45: it did, at every start, with a
 * 573-line module on the path of every process), `vqb migrate` does, once.
 */
export async function checkLayout(
  redis: RedisClient,
  keys: VqbKeys,
  settings: { prefix: string; queueName: string },
): Promise<void> {
  if ((await redis.get(keys.layout)) === CURRENT) return;
  // 0.1.0 kept every structure under `<prefix>:<queue>:vqb:` (one slot, the prefix's hash tag):
  // a deployment that ever had a batch holds its index, or its scheduler's weights or active set.
  const G = `${settings.prefix}:${settings.queueName}:vqb`;
  const old = await redis.exists(`${G}:batches`, `${G}:sched:weights`, `${G}:sched:active`);
  const cut = await redis.exists(`${keys.layout}:lock`);
  if (old > 0 || cut > 0)
    throw new VqbError(
      'LAYOUT_MIGRATION_NEEDED',
      `this Redis holds vqb data in key layout 1 (vqb 0.1.0)` +
        `${cut > 0 ? ', or a move to layout 2 was cut off' : ''}: ` +
        'stop every vqb process, then run `vqb migrate` once ' +
        '(docs/operations.md#upgrading-from-the-single-slot-layout)',
    );
  // Nothing of vqb yet: the data is in the current layout from the first key on. NX: a migration
  // that finished meanwhile wrote the same value.
  await redis.set(keys.layout, CURRENT, 'NX');
}

/**
 * Migration 1 (`vqb migrate`): moves the data to the current key layout if it is not there. When
 * two run at once, one migrates and the other waits for it (up to `waitMs`); throws if the
 * migration fails (the next `vqb migrate` resumes it) or the wait runs out.
 */
export async function migrateLayout(
  redis: RedisClient,
  keys: VqbKeys,
  settings: { prefix: string; queueName: string },
  log: Log = () => {},
  options: LayoutOptions = {},
): Promise<LayoutResult> {
  const lockMs = options.lockMs ?? 60_000;
  const waitMs = options.waitMs ?? 5 * 60_000;
  const layoutKey = keys.layout;
  if ((await redis.get(layoutKey)) === CURRENT) return { moved: 0, alreadyCurrent: true };

  const lockKey = `${layoutKey}:lock`;
  const token = randomBytes(16).toString('hex');
  // Another process migrating: its release is a message (a wait is an event, not a loop asking
  // Redis again); the only timer is its lock's expiry, for a holder that died, or our deadline.
  const took = await lockWhenFree(redis, { key: lockKey, token, ms: lockMs }, { channel: keys.layoutUnlocked }, clock, {
    waitMs,
    moot: async () => (await redis.get(layoutKey)) === CURRENT,
  });
  if (took === 'moot') return { moved: 0, alreadyCurrent: true };
  if (took === 'timeout')
    throw new Error(
      `the Redis data is being moved to key layout ${CURRENT} by another process (lock ` +
        `${lockKey}) and it did not finish within ${waitMs} ms`,
    );

  const lock = holdLock(redis, lockKey, token, lockMs, keys.layoutUnlocked);
  try {
    // Another process may have finished between our GET and taking the lock.
    if ((await redis.get(layoutKey)) === CURRENT) return { moved: 0, alreadyCurrent: true };
    const moved = await migrate(redis, keys, settings, log, lock.check);
    lock.check();
    await redis.set(layoutKey, CURRENT);
    return { moved, alreadyCurrent: false };
  } finally {
    await lock.release();
  }
}

/**
 * Keeps the lock alive while the migration runs; `check` throws once it is lost (two migrators
 * would race on the rebuilt structures).
 */
function holdLock(client: RedisClient, lockKey: string, token: string, lockMs: number, unlocked: string) {
  const redis = withScripts(client, ['lock-extend', 'lock-release']);
  let lost: Error | undefined;
  const timer = clock.setInterval(
    () => {
      redis.vqbLockExtend(lockKey, token, lockMs).then(
        (ok) => {
          if (Number(ok) !== 1) lost ??= new Error(`lost the key layout lock ${lockKey} while moving data`);
        },
        (err: Error) => {
          lost ??= new Error(`could not refresh the key layout lock ${lockKey}: ${err.message}`);
        },
      );
    },
    Math.max(100, Math.floor(lockMs / 3)),
  );
  timer.unref();
  return {
    check(): void {
      if (lost) throw lost;
    },
    async release(): Promise<void> {
      clock.clearTimeout(timer);
      // A failed release only delays the next migrator until the lock expires.
      await redis.vqbLockRelease(lockKey, token, unlocked).catch(() => {});
    },
  };
}

/**
 * Sends commands in one round trip: a pipeline on one server; on a Cluster each command on its own,
 * routed by its key (a pipeline there must stay on one node).
 */
async function send(client: RedisClient, cmds: Command[]): Promise<Reply[]> {
  if (cmds.length === 0) return [];
  if (client instanceof Cluster) {
    return Promise.all(
      cmds.map((c) =>
        (c.buffer ? client.callBuffer(...c.args) : client.call(...c.args)).then(
          (v): Reply => [null, v],
          (err: Error): Reply => [err, null],
        ),
      ),
    );
  }
  const pipeline = client.pipeline();
  for (const c of cmds) {
    if (c.buffer) pipeline.callBuffer(...c.args);
    else pipeline.call(...c.args);
  }
  return ((await pipeline.exec()) ?? []) as Reply[];
}

function replyValue(reply: Reply | undefined, what: string): unknown {
  if (!reply) throw new Error(`no reply to ${what}`);
  if (reply[0]) throw new Error(`${what}: ${reply[0].message}`);
  return reply[1];
}

function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}

async function migrate(
  redis: RedisClient,
  keys: VqbKeys,
  settings: { prefix: string; queueName: string },
  log: Log,
  checkLock: () => void,
): Promise<number> {
  const move = new LayoutMove(redis, keys, settings, log, checkLock);
  // Phase 1: every batch of G:batches gets its account in G:batches:account, keys or not.
  await move.batchAccounts();
  // Phase 2: every old key, streamed from SCAN and moved a chunk at a time.
  await move.oldKeys();
  // Phase 3: the two structures that are split or rebuilt rather than moved whole.
  await move.weights();
  await move.activeAccounts();
  return move.done();
}

/** One run of the move to layout 2: what it has moved, and the batch → account look-ups it made. */
class LayoutMove {
  readonly #started = clock.now();
  // The old names are no longer in keys.ts: this module is the one place that still knows them.
  readonly #G: string;
  readonly #oldQueuePrefix: string;
  readonly #webhooksQueuePrefix: string;
  #moved = 0;
  #announced = false;
  #lastProgress = this.#started;
  // Batch id → account. Kept in G:batches:account (the new layout needs it anyway) before a
  // batch's old hash moves, so a batch key met after its hash, or in a resumed run, still finds it.
  readonly #batchCache = new Map<string, string>();
  readonly #pending: { from: string; route: Route }[] = [];

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: VqbKeys,
    private readonly settings: { prefix: string; queueName: string },
    private readonly log: Log,
    private readonly checkLock: () => void,
  ) {
    this.#G = `${settings.prefix}:${settings.queueName}:vqb`;
    this.#oldQueuePrefix = `${settings.prefix}:${settings.queueName}.`;
    this.#webhooksQueuePrefix = `${this.#oldQueuePrefix}webhooks:`;
  }

  /** Announced at the first old key found: a fresh deployment has nothing to say. */
  #announce(): void {
    if (this.#announced) return;
    this.#announced = true;
    this.log('key layout: moving the Redis data to layout 2 (one slot per account)', { from: this.#G });
  }

  /** A migration of millions of keys takes minutes: a line now and then says it is alive. */
  #progress(): void {
    if (clock.now() - this.#lastProgress < PROGRESS_EVERY_MS) return;
    this.#lastProgress = clock.now();
    this.log('key layout: still moving', { moved: this.#moved });
  }

  async #resolveBatches(ids: Iterable<string>): Promise<void> {
    const { redis, keys } = this;
    // Cleared before the look-up, never after: every id asked for must be in the cache on return.
    if (this.#batchCache.size > BATCH_CACHE_MAX) this.#batchCache.clear();
    const wanted = [...new Set(ids)].filter((id) => !this.#batchCache.has(id));
    if (wanted.length === 0) return;
    const replies = await send(
      redis,
      wanted.flatMap((id) => [cmd('HGET', keys.batchAccounts, id), cmd('HGET', `${this.#G}:batch:${id}`, 'account')]),
    );
    const writes: Command[] = [];
    wanted.forEach((id, i) => {
      const known = replyValue(replies[2 * i], `HGET ${keys.batchAccounts} ${id}`) as string | null;
      const old = replyValue(replies[2 * i + 1], `HGET ${this.#G}:batch:${id} account`) as string | null;
      const account = known ?? (old !== null && ACCOUNT_ID.test(old) ? old : DEFAULT_ACCOUNT);
      this.#batchCache.set(id, account);
      if (known === null) writes.push(cmd('HSETNX', keys.batchAccounts, id, account));
    });
    for (const reply of await send(redis, writes)) replyValue(reply, `HSETNX ${keys.batchAccounts}`);
  }

  #accountOf(id: string): string {
    return this.#batchCache.get(id) ?? DEFAULT_ACCOUNT;
  }

  async batchAccounts(): Promise<void> {
    let cursor = '0';
    do {
      const [next, flat] = await this.redis.zscan(`${this.#G}:batches`, cursor, 'COUNT', 500);
      cursor = next;
      const ids = flat.filter((_, i) => i % 2 === 0).filter((id) => BATCH_ID.test(id));
      if (ids.length > 0) {
        this.#announce();
        await this.#resolveBatches(ids);
      }
      this.checkLock();
    } while (cursor !== '0');
  }

  #route(key: string): Route {
    if (key.startsWith(this.#webhooksQueuePrefix)) return { kind: 'stay' };
    if (key.startsWith(this.#oldQueuePrefix)) {
      const rest = key.slice(this.#oldQueuePrefix.length);
      const colon = rest.indexOf(':');
      const account = rest.slice(0, colon);
      if (colon < 0 || !ACCOUNT_ID.test(account)) return { kind: 'stay' };
      const queue = accountQueueName(this.settings, account);
      return { kind: 'to', to: `${queue.prefix}:${queue.name}${rest.slice(colon)}` };
    }
    if (key.startsWith(`${this.#G}:`)) return routeGlobal(this.keys, key.slice(this.#G.length + 1).split(':'));
    return { kind: 'stay' };
  }

  async #flush(server: Redis): Promise<void> {
    if (this.#pending.length === 0) return;
    const chunk = this.#pending.splice(0, this.#pending.length);
    // The rare key whose name fits two shapes: its type decides.
    const typed = chunk.filter((m) => m.route.kind === 'byType');
    const types = await send(
      this.redis,
      typed.map((m) => cmd('TYPE', m.from)),
    );
    typed.forEach((m, i) => {
      const r = m.route as Extract<Route, { kind: 'byType' }>;
      m.route = replyValue(types[i], `TYPE ${m.from}`) === 'list' ? r.list : r.zset;
    });
    await this.#resolveBatches(chunk.flatMap((m) => (m.route.kind === 'batch' ? [m.route.batch] : [])));
    const moves: Move[] = chunk.flatMap((m) => {
      const r = m.route;
      if (r.kind === 'to') return [{ from: m.from, to: r.to }];
      if (r.kind === 'batch') return [{ from: m.from, to: r.to({ id: r.batch, account: this.#accountOf(r.batch) }) }];
      return [];
    });
    this.#moved += await moveKeys(this.redis, server, moves, this.checkLock);
    this.#progress();
  }

  async oldKeys(): Promise<void> {
    const match = `${globEscape(`${this.settings.prefix}:${this.settings.queueName}`)}[:.]*`;
    for (const server of serversOf(this.redis)) {
      let cursor = '0';
      do {
        const [next, found] = await server.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        for (const key of found) {
          const r = this.#route(key);
          if (r.kind === 'stay' || r.kind === 'special') continue;
          this.#announce();
          this.#pending.push({ from: key, route: r });
          if (this.#pending.length >= CHUNK) await this.#flush(server);
        }
        this.checkLock();
      } while (cursor !== '0');
      await this.#flush(server);
    }
  }

  /** The scheduler's weights: one hash of every batch becomes one per account. */
  async weights(): Promise<void> {
    const { redis, keys } = this;
    const weightsKey = `${this.#G}:sched:weights`;
    let seen = false;
    let cursor = '0';
    do {
      const [next, flat] = await redis.hscan(weightsKey, cursor, 'COUNT', 500);
      cursor = next;
      const pairs: [string, string][] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) if (BATCH_ID.test(flat[i]!)) pairs.push([flat[i]!, flat[i + 1]!]);
      if (flat.length > 0) {
        seen = true;
        this.#announce();
      }
      await this.#resolveBatches(pairs.map(([id]) => id));
      // HSETNX: a field an interrupted run already copied stays as it is.
      const replies = await send(
        redis,
        pairs.map(([id, weight]) => cmd('HSETNX', keys.schedWeights(this.#accountOf(id)), id, weight)),
      );
      for (const reply of replies) replyValue(reply, 'HSETNX weights');
      this.checkLock();
    } while (cursor !== '0');
    if (seen) {
      await redis.del(weightsKey);
      this.#moved++;
    }
  }

  /** The active accounts: rebuilt with each account's flag and generation. */
  async activeAccounts(): Promise<void> {
    const { redis, keys } = this;
    const activeKey = `${this.#G}:sched:active`;
    let seen = false;
    let cursor = '0';
    do {
      const [next, flat] = await redis.zscan(activeKey, cursor, 'COUNT', 500);
      cursor = next;
      const accounts = flat.filter((_, i) => i % 2 === 0).filter((a) => ACCOUNT_ID.test(a));
      if (flat.length > 0) {
        seen = true;
        this.#announce();
      }
      // The flag's generation is what the active zset's score must match: set it, then add the
      // account with the generation it got (a resumed run bumps both again, still equal).
      const flags = await send(
        redis,
        accounts.flatMap((a) => [
          cmd('HSET', keys.schedActiveFlag(a), 'on', '1'),
          cmd('HINCRBY', keys.schedActiveFlag(a), 'gen', 1),
        ]),
      );
      const adds = accounts.map((a, i) => {
        replyValue(flags[2 * i], `HSET ${keys.schedActiveFlag(a)}`);
        const gen = Number(replyValue(flags[2 * i + 1], `HINCRBY ${keys.schedActiveFlag(a)} gen`));
        return cmd('ZADD', keys.schedActive, gen, a);
      });
      for (const reply of await send(redis, adds)) replyValue(reply, `ZADD ${keys.schedActive}`);
      this.checkLock();
    } while (cursor !== '0');
    if (seen) {
      await redis.del(activeKey);
      this.#moved++;
    }
  }

  /** Says the move is over (when there was one) and how many keys it moved. */
  done(): number {
    if (this.#announced)
      this.log('key layout: the Redis data is in layout 2', { moved: this.#moved, ms: clock.now() - this.#started });
    return this.#moved;
  }
}

/**
 * The new name of an old `G:<parts…>` key, by its exact shape (ids hold no `:`, so the part count
 * tells shapes apart).
 */
function routeGlobal(keys: VqbKeys, p: string[]): Route {
  const n = p.length;
  const [head, a, b, c] = p as [string, string | undefined, string | undefined, string | undefined];
  const account = (id: string | undefined): id is string => id !== undefined && ACCOUNT_ID.test(id);
  const batchId = (id: string | undefined): id is string => id !== undefined && BATCH_ID.test(id);
  const to = (name: string): Route => ({ kind: 'to', to: name });
  const ofBatch = (id: string, name: (b: BatchRef) => string): Route => ({ kind: 'batch', batch: id, to: name });
  const isClass = (s: string | undefined) => s !== undefined && (PRIORITY_CLASSES as readonly string[]).includes(s);
  switch (head) {
    case 'batch':
      if (!batchId(a)) break;
      if (n === 2) return ofBatch(a, (r) => keys.batch(r));
      if (n !== 3) break;
      if (b === 'rows') return ofBatch(a, (r) => keys.rows(r));
      if (b === 'outcomes') return ofBatch(a, (r) => keys.outcomes(r));
      if (b === 'ingest') return ofBatch(a, (r) => keys.ingestLock(r));
      if (b === 'webhooks') return ofBatch(a, (r) => keys.batchWebhooks(r));
      break;
    case 'account':
      if (!account(a)) break;
      if (n === 2) return to(keys.account(a));
      if (n === 3 && b === 'pace') return to(keys.pace(a));
      if (n === 3 && b === 'hold') return to(keys.paceHold(a));
      break;
    case 'inflight':
      if (!account(a)) break;
      if (n === 2) return to(keys.inflight(a));
      if (n === 3 && b === 'batches') return to(keys.inflightByBatch(a));
      break;
    case 'sched': {
      if (n === 2) return a === 'weights' || a === 'active' ? { kind: 'special' } : { kind: 'stay' };
      if (n !== 3) break;
      const accountKey = (id: string): Route | undefined =>
        isClass(b) ? to(keys.schedClass(id, b!)) : b === 'staged' ? to(keys.staged(id)) : undefined;
      if (a === 'pending' && batchId(b)) {
        const pendingList = ofBatch(b, (r) => keys.pending(r));
        // An account may be named `pending` and a batch `normal`: the list is the batch's, the zset the account's.
        const ofAccount = accountKey('pending');
        return ofAccount ? { kind: 'byType', list: pendingList, zset: ofAccount } : pendingList;
      }
      if (account(a)) return accountKey(a) ?? { kind: 'stay' };
      break;
    }
    case 'spend':
      if (n === 4 && account(a) && c !== undefined && c !== '') {
        if (b === 'd') return to(keys.spendDay(a, c));
        if (b === 'm') return to(keys.spendMonth(a, c));
      }
      break;
    case 'budget':
      // `budget:<account>` has one part after `budget`, `budget:batch:<id>` two: an account named `batch` is the first.
      if (n === 2 && account(a)) return to(keys.budget(a));
      if (n === 3 && a === 'batch' && batchId(b)) return ofBatch(b, (r) => keys.batchBudget(r));
      break;
    case 'cost':
      // `cost:<day>` (all accounts' totals) stays, read in place as a legacy total.
      if (n === 3 && a === 'batch' && batchId(b)) return ofBatch(b, (r) => keys.batchCosts(r));
      break;
  }
  return { kind: 'stay' };
}

/**
 * DUMP, RESTORE under the new name (keeping the TTL), then DEL: a chunk of keys in a few round
 * trips. Returns how many moved.
 */
async function moveKeys(redis: RedisClient, server: Redis, moves: Move[], checkLock: () => void): Promise<number> {
  if (moves.length === 0) return 0;
  const sizes = await estimateSizes(server, moves);
  let moved = 0;
  let start = 0;
  while (start < moves.length) {
    // Rounds bounded in payload bytes: DUMP replies are held in memory until restored.
    let end = start;
    let bytes = 0;
    while (end < moves.length && (end === start || bytes + sizes[end]! <= ROUND_BYTES)) bytes += sizes[end++]!;
    moved += await moveRound(redis, moves.slice(start, end));
    start = end;
    checkLock();
  }
  return moved;
}

/**
 * MEMORY USAGE of each old key (an estimate, from a few sampled elements), asked of the server
 * SCAN found them on: on a Cluster MEMORY USAGE is not routed by key, and that node holds the old
 * slot. 0 where it cannot say (command refused, slot moved since).
 */
async function estimateSizes(server: Redis, moves: Move[]): Promise<number[]> {
  const pipeline = server.pipeline();
  for (const m of moves) pipeline.call('MEMORY', 'USAGE', m.from);
  const replies = (await pipeline.exec()) ?? [];
  return moves.map((_, i) => {
    const [err, v] = replies[i] ?? [null, null];
    return err || v === null ? 0 : Number(v) || 0;
  });
}

async function moveRound(redis: RedisClient, moves: Move[]): Promise<number> {
  const dumps = await send(
    redis,
    moves.flatMap((m) => [{ args: ['DUMP', m.from], buffer: true }, cmd('PTTL', m.from)]),
  );
  const present: Move[] = [];
  const restores: Command[] = [];
  moves.forEach((m, i) => {
    const payload = replyValue(dumps[2 * i], `DUMP ${m.from}`) as Buffer | null;
    const pttl = Number(replyValue(dumps[2 * i + 1], `PTTL ${m.from}`));
    // Gone since SCAN saw it (expired, or SCAN returned it twice): nothing to move.
    if (payload === null || pttl === -2) return;
    present.push(m);
    restores.push(cmd('RESTORE', m.to, Math.max(pttl, 0), payload));
  });
  const restored = await send(redis, restores);
  present.forEach((m, i) => {
    const [err] = restored[i] ?? [new Error('no reply')];
    // BUSYKEY: the new key exists, copied by a run cut off before its DEL. It is kept.
    if (err && !err.message.startsWith('BUSYKEY')) throw new Error(`RESTORE ${m.to} (from ${m.from}): ${err.message}`);
  });
  const deleted = await send(
    redis,
    present.map((m) => cmd('DEL', m.from)),
  );
  present.forEach((m, i) => {
    replyValue(deleted[i], `DEL ${m.from}`);
  });
  return present.length;
}

/**
 * For long-lived processes (`vqb work`, `vqb serve`), once Redis answers: their workers open their
 * connections synchronously, so the layout is checked here first, on a connection of its own.
 */
export async function checkLayoutAtStart(config: Pick<Config, 'redis' | 'prefix' | 'queueName'>): Promise<void> {
  const redis = connectRedis(config.redis, { name: 'vqb-layout' });
  try {
    await checkLayout(redis, new VqbKeys(config), config);
  } finally {
    await redis.quit().catch(() => redis.disconnect());
  }
}

/** `vqb migrate`: the moves a start refuses to make, on a connection of their own. */
export async function migrateAtCommand(
  config: Pick<Config, 'redis' | 'prefix' | 'queueName'>,
  logger: Pick<Logger, 'info'>,
): Promise<LayoutResult> {
  const redis = connectRedis(config.redis, { name: 'vqb-migrate' });
  try {
    return await migrateLayout(redis, new VqbKeys(config), config, (msg, fields) => logger.info(fields ?? {}, msg));
  } finally {
    await redis.quit().catch(() => redis.disconnect());
  }
}
