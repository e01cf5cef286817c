// What a batch would cost, without calling the upstream: rows read, validated and deduplicated as
// ingest would, minus plates already finished in the same batch and plates a reuse window would
// answer; polls expected from what the poll schedule has learned; time at the account's rate
// and against its daily spending cap.

import { clock } from '../clock.js';
import { costOf, type Money } from '../money.js';
import { type DeadlineVerdict, type DeadlineView, deadlineView, judgeDeadline } from '../plans/deadline.js';
import { planFigures, REQUESTS_PER_PLATE, servingRate } from '../plans/projection.js';
import type { RateSource } from '../queue/line.js';
import type { QueueServices } from '../services.js';
import { PlateDeduper } from './dedup.js';
import type { InputRow } from './types.js';

export interface CostEstimate {
  batchId: string;
  rows: number;
  rejected: number;
  duplicates: number;
  /** Distinct valid plates. */
  plates: number;
  /** Plates the batch already finished (same input run before). */
  alreadyFinished: number;
  /** Plates a stored result would answer (reuse window). */
  reusable: number;
  /** Creates the batch will send: exact, barring crashes (possible duplicate charges). */
  creates: number;
  /** Expected polls: creates × (1 + share of first polls that find the query pending × 1.5). */
  expectedPolls: number;
  expectedRequests: number;
  /** At the configured rate limit, requests only (query completion adds its own tail). */
  secondsAtRate: number;
  /**
   * The rate that time is at: the account's rate in force (configured, or for `auto` announced or
   * learned so far), a pooled batch's the sum of its serving keys', requests per second.
   */
  ratePerSecond: number;
  /**
   * Where that rate comes from; `start`: an `auto` account that has heard nothing from the upstream
   * yet, paced at its starting rate until the first answers announce the limit (the time is at that
   * starting rate).
   */
  rateSource: RateSource;
  /** The wait before a query's first poll (learned, or VQ_POLL_INITIAL): the first results come no sooner. */
  firstPollSeconds: number;
  /** With a per-day spending cap: UTC days the creates need. */
  daysAtCap?: number;
  /** The batch's cap on creates (given in creates, or in money at the price), when it has one. */
  maxCreates?: number;
  /**
   * With a price (VQ_PRICE_PER_QUERY or the account's): the creates at the price per query plus
   * the expected polls at the price per poll (0 unless set), and the price itself.
   */
  cost?: Money & { perQuery: number; perPoll: number };
  /** With a deadline: whether the batch can meet it, its ETA range and cost range (docs/plans.md). */
  deadline?: DeadlineView;
}

export async function estimateCost(
  services: QueueServices,
  batchId: string,
  rows: AsyncIterable<InputRow> | Iterable<InputRow>,
  options: {
    reuseWithinMs?: number;
    account?: string;
    maxCreates?: number;
    now?: () => number;
    /** Epoch ms: judged against the account's rate, answer time and the work ahead (plans/deadline.ts). */
    deadline?: number;
    /** The judgement itself, for the enqueue to refuse or warn with. */
    onVerdict?: (verdict: DeadlineVerdict) => void;
    /** A pooled batch's other keys: its time is at the serving keys' summed rate (docs/plans.md). */
    poolKeys?: readonly string[];
  } = {},
): Promise<CostEstimate> {
  const { config, outcomes } = services;
  const { account } = services.accounts.for(options.account);
  const poolKeys = options.poolKeys ?? [];
  const now = (options.now ?? clock.now)();
  const deduper = new PlateDeduper();
  let total = 0;
  let rejected = 0;
  let duplicates = 0;
  let alreadyFinished = 0;
  let reusable = 0;
  const reuse = services.reuse;
  const reuseWithinMs = options.reuseWithinMs ?? config.budget.reuseWithinMs;
  let chunk: string[] = [];
  const flush = async () => {
    const found = await outcomes.getMany({ id: batchId, account: account.id }, chunk);
    const fresh = found.map((o, i) => (o ? undefined : chunk[i]!)).filter((p): p is string => p !== undefined);
    alreadyFinished += chunk.length - fresh.length;
    reusable += await reuse.countFresh(account.id, fresh, reuseWithinMs, now);
    chunk = [];
  };
  for await (const row of rows) {
    total++;
    const judged = deduper.check(row);
    if (judged.kind === 'rejected') rejected++;
    else if (judged.kind === 'duplicate') duplicates++;
    else {
      chunk.push(judged.plate);
      if (chunk.length >= 1_000) await flush();
    }
  }
  await flush();

  const plates = deduper.size;
  const creates = plates - alreadyFinished - reusable;
  const learned = await services.learner.snapshot(account.product);
  const pendingShare = learned.samples > 0 ? learned.pendingAtFirstPoll / learned.samples : 1 - config.poll.quantile;
  const expectedPolls = Math.round(creates * (1 + pendingShare * 1.5));
  const expectedRequests = creates + expectedPolls;
  // The rate in force: for `auto`, what the account has learned or been told so far (a pool's:
  // the sum of its serving keys'; while none is known, the home key's starting rate).
  const pooled = await servingRate(services, [account.id, ...poolKeys.filter((k) => k !== account.id)]);
  const { perSecond, source } = pooled.perSecond > 0 ? pooled : await services.accounts.for(account.id).line.rate();
  const perDay = account.perDay;
  const price = account.price;
  // At a cap the batch stops creating (and waits): the money is the capped creates'.
  const paid = options.maxCreates === undefined ? creates : Math.min(creates, options.maxCreates);
  const polls = creates === 0 ? 0 : Math.round((expectedPolls * paid) / creates);
  let deadline: DeadlineView | undefined;
  if (options.deadline !== undefined) {
    const perPlate = creates > 0 ? expectedRequests / creates : REQUESTS_PER_PLATE;
    const figures = await planFigures(services, account.id, options.deadline, creates, perPlate, batchId, poolKeys);
    const money = price ? { price, creates: paid, polls } : undefined;
    const verdict = judgeDeadline(options.deadline, figures, now, money, account.id);
    options.onVerdict?.(verdict);
    deadline = deadlineView(verdict, now, config.timeZone);
  }
  return {
    batchId,
    rows: total,
    rejected,
    duplicates,
    plates,
    alreadyFinished,
    reusable,
    creates,
    expectedPolls,
    expectedRequests,
    secondsAtRate: Math.ceil(expectedRequests / perSecond),
    ratePerSecond: Math.round(perSecond * 1000) / 1000,
    rateSource: source,
    firstPollSeconds: Math.round(learned.firstPollMs / 100) / 10,
    ...(perDay ? { daysAtCap: Math.ceil(creates / perDay) } : {}),
    ...(options.maxCreates !== undefined ? { maxCreates: options.maxCreates } : {}),
    ...(price
      ? {
          cost: {
            ...costOf(price, paid, polls),
            perQuery: price.perQueryMicros / 1_000_000,
            perPoll: price.perPollMicros / 1_000_000,
          },
        }
      : {}),
    ...(deadline ? { deadline } : {}),
  };
}
