// What a batch's status needs from beyond the batch itself: its account's line and the share of
// the account's rate it gets now. Read through the modules that own them.

import { perSecond } from '../accounts/account.js';
import { clock } from '../clock.js';
import type { Price } from '../money.js';
import { batchPlan, type DeadlinePlan } from '../plans/projection.js';
import type { BatchInfo } from '../queue/batch/store.js';
import type { AccountLineState } from '../queue/line.js';
import type { QueueServices } from '../services.js';
import type { DeliveryRecord } from '../webhooks/deliveries.js';
import { type StrandedKey, strandedKeys } from './stranded.js';

export interface BatchContext {
  line: AccountLineState;
  /** Share of the account's creates the batch gets now (0: none waiting, or a higher class first). */
  share: number;
  /** The account's configured rate, requests per second. */
  perSecond: number;
  /** The batch's webhook deliveries, when it has a callbackUrl. */
  webhooks?: DeliveryRecord[];
  /** Its account's price, when one is set: the batch's counts as money. */
  price?: Price;
  /** With a deadline: its ETA range, slack and whether it is at risk (docs/plans.md). */
  plan?: DeadlinePlan;
  /** The clock its deadline and the instants in its words are shown on (VQ_TIME_ZONE). */
  timeZone?: string;
  /** Keys that stopped with paid plates of the batch on them (presenters/stranded.ts). */
  stranded?: StrandedKey[];
  /**
   * Its account is not in the settings any more (moved from env settings to an accounts file):
   * the batch is history, shown as it is; nothing of its account is read.
   */
  unconfigured?: true;
}

type StatusServices = Pick<
  QueueServices,
  'accounts' | 'scheduler' | 'redis' | 'keys' | 'config' | 'inflight' | 'learner'
> &
  Partial<Pick<QueueServices, 'webhooks'>>;

export async function batchContext(services: StatusServices, info: BatchInfo): Promise<BatchContext> {
  const [context] = await batchContexts(services, [info]);
  return context!;
}

/**
 * The contexts of many batches, reading each account's line and shares once (a page of batches
 * shares a few accounts).
 */
export async function batchContexts(services: StatusServices, infos: readonly BatchInfo[]): Promise<BatchContext[]> {
  const accounts = new Map<
    string,
    Promise<{ state: AccountLineState; shares: Map<string, number>; perSecond: number; price: Price | undefined }>
  >();
  const configured = new Set(services.config.accounts.map((a) => a.id));
  const read = (accountId: string) => {
    let found = accounts.get(accountId);
    if (!found && !configured.has(accountId)) {
      // History never breaks a listing: an account no longer configured has no line to read.
      const state: AccountLineState = { account: accountId, paused: false, rateLimit: 'not configured' };
      found = Promise.resolve({ state, shares: new Map(), perSecond: 0, price: undefined });
      accounts.set(accountId, found);
    }
    if (!found) {
      const line = services.accounts.line(accountId);
      found = Promise.all([line.state(), services.scheduler.shares(accountId)]).then(([state, shares]) => ({
        state,
        shares: new Map(shares.map((s) => [s.batchId, s.share])),
        // The rate in force (for `auto`, the shared estimate), so ETAs follow what is learned.
        perSecond: state.rate?.perSecond ?? perSecond(line.account),
        price: line.account.price,
      }));
      accounts.set(accountId, found);
    }
    return found;
  };
  return Promise.all(
    infos.map(async (info) => {
      const [account, webhooks, plan, stranded] = await Promise.all([
        read(info.account),
        info.callbackUrl !== undefined && services.webhooks ? services.webhooks.deliveries.list(info) : undefined,
        info.deadline !== undefined && configured.has(info.account)
          ? batchPlan(services, info, clock.now())
          : undefined,
        configured.has(info.account) ? strandedKeys(services, info) : [],
      ]);
      return {
        line: account.state,
        share: account.shares.get(info.id) ?? 0,
        perSecond: account.perSecond,
        ...(webhooks ? { webhooks } : {}),
        ...(account.price ? { price: account.price } : {}),
        ...(plan ? { plan } : {}),
        timeZone: services.config.timeZone,
        ...(stranded.length > 0 ? { stranded } : {}),
        ...(configured.has(info.account) ? {} : { unconfigured: true as const }),
      };
    }),
  );
}
