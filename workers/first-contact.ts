// First contact with the upstream, per account, as one process sees it: until one plate has been
// understood end to end (a create answered with a readable id, then a known final state), the
// account sends one create at a time; an answer vqb cannot read holds the account (a pause with
// the reason UNRECOGNISED_ANSWER and what would read it), at once, or at the third answer when
// only a state is new after the account was understood (an upstream that changed mid-batch).
// What was understood and the held answer live in Redis (src/queue/answers.ts), shared by every process,
// and what one account understood ends first contact for the accounts of the same upstream too.
import type { Logger } from 'pino';
import type { WorkerMetrics } from '../src/metrics.js';
import { type AnswerBook, UNRECOGNISED_ANSWER, upstreamOf } from '../src/queue/answers.js';
import type { AccountLine } from '../src/queue/line.js';
import type { QueueServices } from '../src/services.js';
import { type AnswerShape, describeUnreadable } from '../src/upstream/answers.js';
import type { UnrecognisedAnswerError } from '../src/upstream/errors.js';

/**
 * Answers with a state in no list an account that was understood takes before it holds (an
 * upstream that changed mid-batch).
 */
export const STRIKES_BEFORE_HOLD = 3;

export interface FirstContactDeps {
  line: AccountLine;
  answers: AnswerBook;
  metrics: WorkerMetrics;
  now: () => number;
  /** Told once per hold recorded by this process (it emits account.paused). */
  onPaused?: (accountId: string) => Promise<void>;
  /**
   * Told when this process ended first contact: the account's other plates, which waited in the
   * scheduler (the feeder gives a meeting account one create at a time), are fed now and every
   * process's Workers woken, not at the next feed pass.
   */
  onUnderstood?: (accountId: string) => Promise<void>;
}

export class FirstContact {
  readonly #d: FirstContactDeps;
  /** First contact is over for the account (read from Redis until it is; it never starts again). */
  #understood = false;
  /** This process held the account for an answer (and when it last looked whether it still is). */
  #answerHold: { checkedAt: number } | undefined;

  constructor(deps: FirstContactDeps) {
    this.#d = deps;
  }

  get #account(): string {
    return this.#d.line.account.id;
  }

  /** The account's upstream (queue/answers.ts `upstreamOf`), worked out once. */
  #upstreamId: string | undefined;
  get #upstream(): string {
    this.#upstreamId ??= upstreamOf(this.#d.line.account);
    return this.#upstreamId;
  }

  /**
   * Whether the account still meets its upstream (no plate understood end to end yet): asked of the
   * answer book (a read of Redis a second at most while it does) until the answer is no, then never
   * again in this process.
   */
  async meeting(): Promise<boolean> {
    if (this.#understood) return false;
    this.#understood = !(await this.#d.answers.meeting(this.#d.line.account, this.#d.now()));
    return !this.#understood;
  }

  /**
   * A plate was read end to end (an id, then a known final state): first contact is over. The call
   * that ends it for the account (the first such plate this process saw while it met its upstream)
   * says so and feeds the account (onUnderstood). `seed` (the plate's answer time into the poll
   * schedule: workers/processor.ts) runs first, before first contact ends for any process: the
   * feeds that follow at once read the answer time to mark a batch's last creates
   * (queue/feeder.ts #closing), and read before the seed it was the 15 s prior, which marked a
   * whole cold 300-plate batch at 30/s as closing and held every poll behind its creates (none for
   * 10 s, 270 paid queries unread).
   */
  async understood(shape: AnswerShape | undefined, log: Logger, seed?: () => Promise<void>): Promise<void> {
    if (this.#understood) return;
    this.#understood = true;
    await seed?.();
    if (!(await this.#d.answers.learn(this.#account, shape ?? {}, this.#d.now(), this.#upstream))) return;
    log.info(
      { event: 'account.answers_understood', account: this.#account, shape },
      "first contact: the upstream's answers read end to end; creates go at the account's pace",
    );
    await this.#d.onUnderstood?.(this.#account);
  }

  /**
   * An answer vqb cannot read. The account holds (pauses for every worker, reason
   * UNRECOGNISED_ANSWER, with what the answer showed and which settings would read it) at once,
   * unless it was understood before and only a state is new: then at the STRIKES_BEFORE_HOLD-th
   * such answer (an upstream that changed mid-batch). Returns whether it holds now.
   */
  async onUnreadable(err: UnrecognisedAnswerError, log: Logger): Promise<boolean> {
    const stateOnly = err.why !== 'no-id';
    if (stateOnly && !(await this.meeting())) {
      const strikes = await this.#d.answers.strike(this.#account);
      if (strikes < STRIKES_BEFORE_HOLD) {
        log.warn(
          { event: 'answer.unrecognised', account: this.#account, state: err.state, strikes },
          `the upstream answered a state vqb does not know (${JSON.stringify(err.state ?? '')}): ` +
            `the plate waits; the account holds at the ${STRIKES_BEFORE_HOLD}rd such answer`,
        );
        return false;
      }
    }
    const message = describeUnreadable(err.operation, err.why, err.answer, err.state, this.#account);
    await this.#d.answers.hold(this.#account, {
      operation: err.operation,
      status: err.status,
      answer: err.answer,
      why: err.why,
      at: this.#d.now(),
    });
    this.#answerHold = { checkedAt: this.#d.now() };
    const verdict = await this.#d.line.pause(UNRECOGNISED_ANSWER, message);
    if (verdict === 'recorded') {
      this.#d.metrics.waited(this.#account, 'answer', 0);
      log.fatal(
        { event: 'account.paused', account: this.#account, code: UNRECOGNISED_ANSWER },
        `account held: ${message}`,
      );
      await this.#d.onPaused?.(this.#account);
    }
    return true;
  }

  /**
   * Whether the account is held for an answer, as this process knows it: asked right before a
   * request, so the polls and creates already in this worker (waiting for their slot, or in the
   * poll room) send nothing once it held. No Redis call unless this process held it; then one a
   * second at most, to hear a resume.
   */
  async heldForAnswer(): Promise<boolean> {
    const hold = this.#answerHold;
    if (hold === undefined) return false;
    if (this.#d.now() - hold.checkedAt < 1_000) return true;
    hold.checkedAt = this.#d.now();
    if ((await this.#d.line.state()).pause?.code === UNRECOGNISED_ANSWER) return true;
    this.#answerHold = undefined;
    return false;
  }
}

/**
 * First contact ended with `accountId`'s answer: the plates that waited in the scheduler go out
 * now, the account's and those of every busy account of the same upstream, whose first contact the
 * answers read end too (queue/answers.ts learn); each process's Workers are woken (feedAndWake).
 * Left to the feed pass, such an account waited out its rest while meeting (up to 5 s: a 10/s key
 * beside a 20/s one sat idle 3 s of a cold start). Returns the accounts fed; a failed feed is
 * told to `onError` and the others go on.
 */
export async function feedAfterFirstContact(
  services: Pick<QueueServices, 'accounts' | 'scheduler' | 'feeder'>,
  accountId: string,
  onError: (err: unknown, accountId: string) => void,
): Promise<string[]> {
  const upstream = upstreamOf(services.accounts.for(accountId).account);
  // Unread (Redis away), the account itself is still fed, and the failure said.
  const active = new Set(
    await services.scheduler.activeAccounts().catch((err: unknown) => {
      onError(err, accountId);
      return [] as string[];
    }),
  );
  const others = services.accounts
    .all()
    .filter(({ account }) => account.id !== accountId && active.has(account.id))
    .filter(({ account }) => upstreamOf(account) === upstream)
    .map(({ account }) => account.id);
  const fed: string[] = [];
  for (const id of [accountId, ...others]) {
    try {
      await services.feeder.feedAndWake(id);
      fed.push(id);
    } catch (err) {
      onError(err, id);
    }
  }
  return fed;
}
