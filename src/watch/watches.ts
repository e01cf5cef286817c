// What the front doors (vqb watch, /v1/watches, the console) do with watches, in one place: add a
// list with its schedule, find one by name within the accounts a caller may see (another
// account's watch is not found, as if absent), pause, resume, remove, change the month budget,
// and read the changes of a round.
import type { Logger } from 'pino';
import { clock } from '../clock.js';
import { InputError, VqbError } from '../errors.js';
import { createsCap } from '../money.js';
import { checkRequest } from '../producers/enqueue.js';
import { utcMonth } from '../queue/costs.js';
import { releaseBatchHold } from '../queue/holds.js';
import type { QueueServices } from '../services.js';
import { Rounds } from './rounds.js';
import { checkCron, parseEvery, parseWindow } from './schedule.js';
import { WatchSchedules } from './schedules.js';
import {
  type ChangeLine,
  type ChangesFormat,
  type NotifyRule,
  type OverlapRule,
  type RoundRecord,
  type Watch,
  type WatchRef,
  type WatchSpec,
  WatchStore,
} from './store.js';

export const WATCH_NAME_RULE = 'a watch name is 1-64 letters, digits, _ and -';
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** A new watch as a door read it (text as typed: durations, cron, window are checked here). */
export interface WatchRequest {
  name: string;
  /** The account; default the first the caller may use. */
  account?: string | undefined;
  /** A pool of keys instead of one account: its rounds are served by every key (docs/plans.md). */
  pool?: string | undefined;
  every?: string | undefined;
  cron?: string | undefined;
  window?: string | undefined;
  overlap?: OverlapRule | undefined;
  notify?: NotifyRule | undefined;
  callbackUrl?: string | undefined;
  ignore?: string[] | undefined;
  perMonth?: number | undefined;
  /** A month budget in money: creates at the account's price (NO_PRICE without one). */
  perMonthSpend?: number | undefined;
  format?: ChangesFormat | undefined;
}

/** A watch as the doors show it: the stored one, its rounds and when it fires next. */
export interface WatchView extends Watch {
  nextAt?: number;
  rounds: RoundRecord[];
  spentThisMonth: number;
}

export class Watches {
  readonly store: WatchStore;
  readonly schedules: WatchSchedules;
  readonly rounds: Rounds;
  readonly #services: Omit<QueueServices, 'close'>;
  readonly #now: () => number;

  constructor(
    services: Omit<QueueServices, 'close'>,
    logger: Logger,
    now: () => number = clock.now,
    /** A round job was added by this process (the worker process wakes its watch Worker). */
    added?: () => void,
  ) {
    this.#services = services;
    this.#now = now;
    this.store = new WatchStore(services.redis, services.keys);
    this.schedules = new WatchSchedules(services.config, services.redis, added);
    this.rounds = new Rounds({ services, store: this.store, schedules: this.schedules, logger, now });
  }

  /**
   * The account a watch runs on: the one named (or the first the token sees), or with a pool
   * (`--pool`) its home key; a pool whose keys the token does not all see is not found.
   */
  ownerOf(request: Pick<WatchRequest, 'account' | 'pool'>, visible: readonly string[]): string {
    if (request.pool !== undefined) {
      // Asked as the batch API asks (api/routes/batches.ts): a pool the token does not see whole
      // is not found, in words that name nothing (no declared pool, no other tenant's account).
      const keys = this.#services.config.accounts.filter((a) => a.pool === request.pool);
      if (keys.length === 0 || !keys.every((a) => visible.includes(a.id)))
        throw new VqbError('POOL_NOT_FOUND', `no pool ${JSON.stringify(request.pool)} for this token`);
      // The pool's rules (its home key) are enqueue's, as for every batch the watch will make.
      return checkRequest(this.#services.config, {
        pool: request.pool,
        ...(request.account !== undefined ? { account: request.account } : {}),
      }).account!;
    }
    const id = request.account ?? visible[0];
    if (id === undefined || !visible.includes(id) || !this.#services.config.accounts.some((a) => a.id === id))
      throw new InputError('ACCOUNT_NOT_FOUND', `no account ${JSON.stringify(request.account ?? '')}`);
    return id;
  }

  /** Checks everything, stores the watch and starts its schedule (an `every` watch's first round starts now). */
  async add(request: WatchRequest, plates: readonly string[], visible: readonly string[]): Promise<WatchView> {
    const config = this.#services.config;
    if (!NAME.test(request.name)) throw new InputError('WATCH_BAD_NAME', WATCH_NAME_RULE);
    const account = this.ownerOf(request, visible);
    const minMs = config.watch.minEveryMs;
    if ((request.every === undefined) === (request.cron === undefined))
      throw new InputError('WATCH_BAD_SCHEDULE', 'a watch needs one of --every DURATION and --cron "<pattern>"');
    if (plates.length === 0) throw new InputError('WATCH_NO_PLATES', 'the list has no valid plate to watch');
    const price = this.#services.accounts.for(account).account.price;
    const perMonth =
      request.perMonthSpend !== undefined
        ? createsCap({ maxCreates: request.perMonth, maxSpend: request.perMonthSpend }, price, account)
        : request.perMonth;
    const callbackUrl =
      request.callbackUrl !== undefined ? await this.#services.webhooks.checkTarget(request.callbackUrl) : undefined;
    const spec: WatchSpec = {
      name: request.name,
      account,
      ...(request.pool !== undefined ? { pool: request.pool } : {}),
      ...(request.every !== undefined ? { everyMs: parseEvery(request.every, minMs) } : {}),
      ...(request.cron !== undefined ? { cron: checkCron(request.cron, minMs, this.#now()) } : {}),
      ...(request.window !== undefined ? { window: parseWindow(request.window) } : {}),
      overlap: request.overlap ?? 'wait',
      notify: request.notify ?? 'plate',
      ...(callbackUrl !== undefined ? { callbackUrl } : {}),
      ignore: request.ignore ?? [],
      ...(perMonth !== undefined ? { perMonth } : {}),
      ...(request.perMonthSpend !== undefined ? { perMonthMoney: request.perMonthSpend } : {}),
      format: request.format ?? 'csv',
    };
    if (!(await this.store.create(spec, plates, this.#now())))
      throw new InputError('WATCH_EXISTS', `account ${account} has a watch named ${spec.name} already`);
    await this.schedules.upsert(spec, spec);
    return this.show(spec);
  }

  /** The watch of that name among `visible` accounts; WATCH_NOT_FOUND else (another account's too). */
  async find(name: string, visible: readonly string[], account?: string): Promise<Watch> {
    const accounts = account !== undefined ? visible.filter((a) => a === account) : visible;
    const found: Watch[] = [];
    for (const a of accounts) {
      const w = await this.store.get({ account: a, name });
      if (w !== undefined) found.push(w);
    }
    if (found.length === 0) throw new InputError('WATCH_NOT_FOUND', `no watch named ${JSON.stringify(name)}`);
    if (found.length > 1)
      throw new InputError(
        'WATCH_AMBIGUOUS',
        `watches named ${name} in accounts ${found.map((w) => w.account).join(', ')}: say which with --account`,
      );
    return found[0]!;
  }

  async list(visible: readonly string[]): Promise<WatchView[]> {
    const out: WatchView[] = [];
    for (const account of visible)
      for (const name of await this.store.names(account)) {
        const view = await this.show({ account, name }).catch(() => undefined);
        if (view !== undefined) out.push(view);
      }
    return out;
  }

  async show(ref: WatchRef): Promise<WatchView> {
    const w = await this.store.get(ref);
    if (w === undefined) throw new InputError('WATCH_NOT_FOUND', `no watch named ${JSON.stringify(ref.name)}`);
    const [nextAt, rounds, spent] = await Promise.all([
      w.paused ? undefined : this.schedules.next(ref),
      this.store.rounds(ref),
      this.store.spent(ref, utcMonth(this.#now())),
    ]);
    return { ...w, ...(nextAt !== undefined ? { nextAt } : {}), rounds, spentThisMonth: spent };
  }

  /** No more rounds start (a running one finishes and is compared). */
  async pause(ref: WatchRef): Promise<WatchView> {
    await this.schedules.remove(ref);
    await this.store.set(ref, { paused: true, state: 'paused', reason: 'paused (vqb watch resume NAME goes on)' });
    return this.show(ref);
  }

  async resume(ref: WatchRef): Promise<WatchView> {
    const w = await this.show(ref);
    await this.store.set(ref, { paused: false, state: w.open !== undefined ? 'running' : 'idle', reason: null });
    await this.schedules.upsert(ref, w);
    return this.show(ref);
  }

  /** Forgets the watch; a round running keeps its batch (an ordinary batch from now on). */
  async remove(ref: WatchRef): Promise<void> {
    await this.schedules.remove(ref);
    await this.store.remove(ref);
  }

  /**
   * A new month budget (`null`: none). The round held at the old one goes on: its batch's create
   * cap becomes what the month still allows, and a round that could not start starts now.
   */
  async setBudget(ref: WatchRef, perMonth: number | null): Promise<WatchView> {
    const w = await this.show(ref);
    await this.store.set(ref, { perMonth, perMonthMoney: null });
    const spent = w.spentThisMonth;
    const cap = perMonth === null ? null : Math.max(0, perMonth - spent);
    if (w.open !== undefined) {
      const round = await this.store.round(ref, w.open);
      if (round !== undefined && round.closedAt === undefined) {
        const batch = { id: round.batchId, account: w.account };
        await this.#services.budget.setMaxCreates(batch, cap);
        await releaseBatchHold(this.#services, batch);
        const short = cap !== null && cap < round.plates;
        await this.store.set(ref, {
          state: short ? 'held' : 'running',
          reason: short ? `round ${w.open} holds at the month budget: ${cap} of ${round.plates} plates` : null,
        });
      }
    } else if (w.due && w.state === 'held' && (cap === null || cap > 0)) {
      await this.schedules.once(ref, `budget-${w.round + 1}-${this.#now()}`);
    }
    return this.show(ref);
  }

  /** A round's changes: the last compared round by default. */
  async changes(ref: WatchRef, round?: number): Promise<{ round: number; changes: ChangeLine[] }> {
    const w = await this.show(ref);
    const n = round ?? w.compared;
    const record = w.rounds.find((r) => r.round === n);
    if (record === undefined || record.closedAt === undefined)
      throw new InputError(
        'WATCH_ROUND_NOT_FOUND',
        n === 0 ? `watch ${ref.name} has no compared round yet` : `watch ${ref.name} has no compared round ${n}`,
      );
    return { round: n, changes: await this.store.changes(ref, n) };
  }

  async close(): Promise<void> {
    await this.schedules.close();
  }
}
