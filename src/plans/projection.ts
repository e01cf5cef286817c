// A batch's deadline against what its account knows now: the figures the pure judgement
// (plans/deadline.ts) takes, read through the modules that own them (the account's rate in force,
// the poll learner's answer time, the scheduler's work ahead of the batch). Used by the dry run and
// the enqueue (a batch not stored yet), and by `vqb status`, the API, the console and the deadline
// watch (a running batch).
import { clock } from '../clock.js';
import type { BatchInfo } from '../queue/batch/store.js';
import type { RateSource } from '../queue/line.js';
import { keyStates } from '../queue/pool.js';
import type { QueueServices } from '../services.js';
import { type DeadlineVerdict, type HeldKey, judgeDeadline, type PlanFigures } from './deadline.js';

/** Requests a plate takes before the batch has its own figures: a create, its poll, a tenth of them a second poll. */
export const REQUESTS_PER_PLATE = 2.15;

type PlanServices = Pick<QueueServices, 'accounts' | 'scheduler' | 'redis' | 'keys' | 'config' | 'learner'>;

/** The rate a batch is served at, the keys that serve it, and (none serving) the keys that hold and why. */
export interface ServingRate {
  perSecond: number;
  source: RateSource;
  keys: string[];
  held: HeldKey[];
}

/**
 * The rate a batch is served at: its account's rate in force, or for a pooled batch (its home
 * first, then the pool's other keys) the sum of the keys serving now (queue/pool.ts keyStates, as
 * `vqb status` shows the pool). A key still at its starting rate adds nothing known; its source is
 * the least certain of the keys counted.
 */
export async function servingRate(
  services: Pick<QueueServices, 'accounts'>,
  accountIds: readonly string[],
): Promise<ServingRate> {
  const records = accountIds.map((id) => services.accounts.for(id));
  if (records.length === 1) {
    const rate = await records[0]!.line.rate();
    return { perSecond: rate.perSecond, source: rate.source, keys: [records[0]!.id], held: [] };
  }
  const now = await keyStates(records);
  const serving = now.filter((k) => k.holding === undefined);
  const known = serving.filter((k) => k.rate.source !== 'start');
  const held = serving.length === 0 ? now.map((k) => ({ account: k.account, why: k.holding ?? '' })) : [];
  if (known.length === 0) return { perSecond: 0, source: serving.length > 0 ? 'start' : 'configured', keys: [], held };
  const source: RateSource = known.some((k) => k.rate.source === 'learned')
    ? 'learned'
    : known.some((k) => k.rate.source === 'announced')
      ? 'announced'
      : 'configured';
  return {
    perSecond: known.reduce((sum, k) => sum + k.rate.perSecond, 0),
    source,
    keys: known.map((k) => k.account),
    held,
  };
}

/**
 * The figures for `plates` plates of account `accountId` due at `deadline` (`except`: the batch
 * itself, when stored; `poolKeys`: a pooled batch's other keys, served at their summed rate, with
 * the work ahead on each of them).
 */
export async function planFigures(
  services: PlanServices,
  accountId: string,
  deadline: number,
  plates: number,
  requestsPerPlate: number,
  except?: string,
  poolKeys: readonly string[] = [],
): Promise<PlanFigures> {
  const { account } = services.accounts.for(accountId);
  const ids = [accountId, ...poolKeys.filter((k) => k !== accountId)];
  const [rate, learned] = await Promise.all([servingRate(services, ids), services.learner.snapshot(account.product)]);
  // The work ahead on the keys that serve: interactive plates on each, and each earlier batch
  // once (a pooled one is one list whichever of its keys is asked).
  let interactive = 0;
  const earlier = new Map<string, { deadline: number; waiting: number }>();
  for (const id of rate.keys.length > 0 ? rate.keys : [accountId]) {
    const ahead = await services.scheduler.aheadOf(id, deadline, except);
    interactive += ahead.interactive;
    for (const b of ahead.earlier) earlier.set(b.batchId, b);
  }
  const aheadPlates = platesAhead(
    { interactive, earlier: [...earlier.values()].sort((a, b) => a.deadline - b.deadline) },
    rate.perSecond,
    learned.firstPollMs,
    clock.now(),
  );
  return {
    perSecond: rate.perSecond,
    rateSource: rate.source,
    requestsPerPlate,
    answerMs: learned.firstPollMs,
    plates,
    aheadPlates,
    ...(rate.held.length > 0 ? { held: rate.held } : {}),
  };
}

/**
 * The plates that take the batch's time: every interactive one, and those of each batch due
 * earlier that can still make its deadline. The rule of the feed (sched-take's urgentBatches): a
 * batch that cannot make it even served first is left to the weights and takes no one's time.
 */
export function platesAhead(
  ahead: { interactive: number; earlier: readonly { deadline: number; waiting: number }[] },
  perSecond: number,
  answerMs: number,
  now: number,
): number {
  const msPerPlate = (REQUESTS_PER_PLATE * 1_000) / Math.max(perSecond, 1e-6);
  let need = answerMs * 1.5 + 2_000;
  let plates = ahead.interactive;
  for (const b of ahead.earlier) {
    const needed = need + b.waiting * msPerPlate;
    if (b.deadline - now < needed / 1.5) continue;
    need = needed;
    plates += b.waiting;
  }
  return plates;
}

/** A running (or finished) batch's deadline as its readers show it. */
export interface DeadlinePlan {
  deadline: number;
  verdict: DeadlineVerdict;
  /** The projected finish (expected) passes the deadline; a finished batch: it finished after it. */
  atRisk: boolean;
  /** Finished: when, and so the slack it had. */
  finishedAt?: number;
}

/** The deadline plan of a batch that has one; undefined otherwise. */
export async function batchPlan(
  services: PlanServices,
  info: BatchInfo,
  now: number,
): Promise<DeadlinePlan | undefined> {
  const deadline = info.deadline;
  if (deadline === undefined) return undefined;
  const c = info.counts;
  const finished = c.done + c.failed;
  if (info.finishedAt !== undefined) {
    const verdict: DeadlineVerdict = {
      feasibility: info.finishedAt <= deadline ? 'feasible' : 'not feasible',
      deadline,
      eta: { low: info.finishedAt, high: info.finishedAt, expected: info.finishedAt },
      slackMs: deadline - info.finishedAt,
      aheadPlates: 0,
    };
    return { deadline, verdict, atRisk: info.finishedAt > deadline, finishedAt: info.finishedAt };
  }
  const perPlate = finished > 0 ? Math.max(1, (c.creates + c.polls) / finished) : REQUESTS_PER_PLATE;
  const left = Math.max(0, c.enqueued - finished);
  const figures = await planFigures(services, info.account, deadline, left, perPlate, info.id, info.pool?.keys);
  const verdict = judgeDeadline(deadline, figures, now, undefined, info.account);
  const atRisk = verdict.eta !== undefined && verdict.eta.expected > deadline;
  return { deadline, verdict, atRisk };
}
