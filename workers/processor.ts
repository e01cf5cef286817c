// The job processor: CREATE → POLL → DONE for one account, one upstream request per activation at
// most. Before each request the account's flow control (workers/flow.ts) admits it or says what
// to do instead; after a failure the failure table (workers/actions.ts) decides. Between polls the
// job waits in `delayed` holding no worker slot. The step and the queryId are written to the job
// the moment a create answers, so a crash, a stall or a retry after that point polls the same
// query instead of paying for a new one. Every write of the job's data goes through the fence
// (src/queue/job-fence.ts, where the create protocol is written down as a table): a worker that
// was paused past its lock sends no create and writes no older step over a newer one.

import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { DelayedError, type Job, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { type Clock, clock as processClock } from '../src/clock.js';
import type { Config } from '../src/config.js';
import { isError, StoppedBeforeSendError } from '../src/errors.js';
import { lazyChild } from '../src/logger.js';
import { freshPriority, pollPriority } from '../src/queue/account-queues.js';
import type { CostField } from '../src/queue/costs.js';
import type { FenceResult, JobFence } from '../src/queue/job-fence.js';
import { answeredWithin, firstContactPollDelay, nextPollDelay, type PollLearner } from '../src/queue/poll-schedule.js';
import { batchOf, type OutcomeError, type PlateJobData } from '../src/queue/types.js';
import { isRedisDown, isRedisFull } from '../src/redis/health.js';
import { endStep, keepContext, SPAN, spanned, type Within } from '../src/telemetry/index.js';
import type { KeptAnswer } from '../src/upstream/answers.js';
import type { AnsweredQuery, QuotaSnapshot, SendOptions } from '../src/upstream/client.js';
import { type AnyUpstreamError, isUpstreamError, type UnrecognisedAnswerError } from '../src/upstream/errors.js';
import type { QueryOutcome } from '../src/upstream/response.js';
import { decide, wasSent } from './actions.js';
import { type AccountFlow, type Admission, isUnreachable, type SendAdmission } from './flow.js';
import { jobAttributes } from './job-attributes.js';
import { type LockLoss, type LockLossWhen, lockErrorJob } from './lock-loss.js';
import type { PollRoom } from './poll-room.js';
import type { HeldPaid, Recorder } from './recorder.js';

/** What the processor needs of the upstream client (an interface, so tests may wrap it). */
export interface QueryApi {
  createQuery(plate: string, product?: string, options?: SendOptions): Promise<AnsweredQuery>;
  getQuery(queryId: string, options?: SendOptions): Promise<AnsweredQuery>;
  /** An answer kept with its plate, read again with the settings in force (no request). */
  reread(kept: KeptAnswer, knownQueryId?: string): QueryOutcome;
  readonly quota: QuotaSnapshot | undefined;
}

export interface ProcessorDeps {
  config: Pick<Config, 'poll' | 'recreateUncertain'>;
  api: QueryApi;
  flow: AccountFlow;
  recorder: Recorder;
  learner: PollLearner;
  /** Every write of job data that matters goes through it. */
  fence: JobFence;
  lockLoss: LockLoss;
  logger: Logger;
  /** The time the worker runs on (services.ts), and a test's randomness. */
  clock?: Clock;
  random?: () => number;
  /**
   * Resolves once the job's last write reached a replica (Sentinel: a write only the old primary
   * had is lost in a failover). Unset where there is no replica to wait for.
   */
  replicated?: () => Promise<void>;
  /**
   * Awaited between the fencing check (the `creating` mark written under the lock) and the send:
   * the window a pause there leaves open. Only tests set it (`VQB_TEST_STOP_AFTER_FENCE`).
   */
  afterFence?: () => Promise<void>;
  /**
   * Room for polls waiting for their time in this worker, their jobs kept active (none: every poll
   * goes to the delayed set; see #pollAt).
   */
  pollRoom?: PollRoom;
  /**
   * Until when a batch's creates are closing (the clock's now()), undefined when they are not: its
   * polls yield to creates until then (queue/feeder.ts closingUntil).
   */
  closing?: (batchId: string) => number | undefined;
}

/**
 * A poll due within this long waits for it in the worker, its job kept active and its lock held
 * (BullMQ renews it), instead of going through BullMQ's delayed set: moveToDelayed, promotion and
 * a fetch cost about 25 Redis commands a poll (issue 21). Further off, or with no room, it goes
 * to the delayed set as before. 8 s: the first-poll delay first contact seeds is twice its answer
 * (queue/poll-schedule.ts seedMs), 5-6 s when that answer took 2.5-3 s; at 5 s here every plate
 * created before the learner came down went through the delayed set (157-176 of 300 plates in a
 * cold batch: 122-124 commands a plate against 104-105 when the first answer was quicker).
 */
const POLL_WAIT_HERE_MS = 8_000;

/** What a poll that was answered is counted as (queue/costs.ts). */
const POLL_COUNT: CostField[] = ['polls', 'pollsSent'];

/**
 * A wait that ended this much later than planned (the process was paused, the event loop blocked)
 * is not trusted: the lock may have lapsed and another worker may be polling. The job goes to the
 * delayed set instead, which BullMQ refuses without the lock.
 */
const OVERSLEPT_MS = 1_000;

export type JobResult = { status: 'done' | 'exists'; queryId?: string };

type PlateJob = Job<PlateJobData, unknown, string>;

/** The job is someone else's now (this worker lost its lock): BullMQ must not touch it. */
class LostJob extends DelayedError {}

/** Errors BullMQ acts on itself pass through untouched. */
function isControlFlow(err: unknown): boolean {
  return (
    err instanceof DelayedError ||
    err instanceof UnrecoverableError ||
    (err as Error | undefined)?.message === 'bullmq:rateLimitExceeded'
  );
}

export class PlateProcessor {
  readonly #d: ProcessorDeps;
  readonly #now: () => number;
  readonly #random: () => number;
  /** The stop that ends the waits of polls waiting in this worker (see #pollAt). */
  readonly #stop = new AbortController();
  /** Each job's activation context (tracing), to run its next poll under: see #pollAt. */
  readonly #activation = new WeakMap<PlateJob, Within>();
  /** A 429's request → the slot it was sent in: the learner leaves a refusal paced before its last step alone. */
  readonly #refusedSlot = new WeakMap<object, string>();
  readonly #clock: Clock;

  constructor(deps: ProcessorDeps) {
    this.#d = deps;
    // Every poll waiting here listens to the one stop (up to the poll room's size, 256): Node's
    // warning past 10 listeners would only print on stderr, mid-progress.
    setMaxListeners(0, this.#stop.signal);
    this.#clock = deps.clock ?? processClock;
    this.#now = () => this.#clock.now();
    this.#random = deps.random ?? Math.random;
  }

  /**
   * The worker is stopping: polls waiting here go to BullMQ's delayed set at once, so the stop need
   * not wait for them.
   */
  stopWaits(): void {
    this.#stop.abort();
  }

  readonly process = async (job: PlateJob, token?: string): Promise<JobResult> => {
    const data = job.data;
    const log = lazyChild(this.#d.logger, () => ({
      account: data.account,
      batchId: data.batchId,
      jobId: job.id,
      ...(data.queryId ? { queryId: data.queryId } : {}),
    }));
    // A plate with its outcome already is not worked again. At step `create` (most jobs) the
    // create's admission looks, in the step it runs anyway; at any other, a look of its own.
    if (data.step !== 'create' && (await this.#d.recorder.finishedBefore(job))) return { status: 'exists' };
    try {
      if (data.step === 'unread') return await this.#reread(job, token, log);
      // Tracing: a poll made after a wait in this worker is a sibling of the step before it.
      this.#activation.set(job, keepContext());
      if (data.step === 'poll') return await this.#poll(job, token, log);
      return await spanned(SPAN.create, jobAttributes(data), () => this.#create(job, token, log), true);
    } catch (err) {
      if (isControlFlow(err)) throw err;
      if (isUpstreamError(err)) return await this.#onUpstreamError(job, err, log);
      if (isRedisDown(err) || isRedisFull(err)) {
        // Redis, not the plate: wait until it takes writes again (the job's latest data is the
        // probe, so what it holds, a query id, is stored too), then put the job back with no
        // attempt spent. A full Redis must never turn a paid plate into a failed one.
        await this.#d.recorder.untilStored(data.account, () => this.#d.fence.write(job, token, job.data, job.data));
        throw Worker.RateLimitError();
      }
      // Anything else (bugs) is retried by BullMQ; on the last attempt, keep a record.
      if (this.#isLastAttempt(job))
        await this.#d.recorder.record(job, job.data, {
          code: 'INTERNAL_ERROR',
          message: (err as Error).message ?? String(err),
        });
      throw err;
    }
  };

  async #create(job: PlateJob, token: string | undefined, log: Logger): Promise<JobResult> {
    const data = job.data;
    let possibleDuplicate = data.possibleDuplicate === true;
    if (data.step === 'creating') {
      // The create was sent and its answer never stored: the upstream may have made (and charged) it.
      if (!this.#d.config.recreateUncertain) {
        const message =
          'a create was sent and its answer was lost; not re-sent (VQ_RECREATE_UNCERTAIN=false): ' +
          'check the upstream for this plate';
        return this.#failWith(job, data, { code: 'CREATE_UNCERTAIN', message }, log);
      }
      possibleDuplicate = true;
      log.warn({ plate: data.plate }, 're-sending a create whose answer was lost: possible duplicate charge');
    }
    const stored = await this.#d.recorder.reusable(data);
    if (stored) {
      const reused: PlateJobData = { ...data, ...(stored.queryId ? { queryId: stored.queryId } : {}) };
      const extra = { reused: true, reusedAgeMs: stored.ageMs };
      // Counted as reused in the write that stores it, only if it became the plate's outcome (the
      // plate may have one already: its admission, which would have said so, comes after this look).
      await this.#d.recorder.record(job, reused, undefined, stored.result, extra);
      return { status: 'done', ...(stored.queryId ? { queryId: stored.queryId } : {}) };
    }
    // A newcomer batch's first plate (fed at a poll's priority) may take a turn from a poll.
    const verdict = await this.#d.flow.admitCreate(job.id!, data, job.priority === freshPriority());
    if (!verdict.go && verdict.why === 'finished') return { status: 'exists' };
    const admission = await this.#admitted(verdict, job, token);
    if (await this.#d.flow.stopped()) {
      // Paused or held meanwhile (a key failure, an answer vqb cannot read): nothing is sent, the
      // slot and cap unit go back.
      await this.#d.flow.refundCreate(job.id!, data);
      throw Worker.RateLimitError();
    }

    const creating: PlateJobData = {
      ...data,
      step: 'creating',
      creatingAt: this.#now(),
      createId: randomUUID(),
      ...(possibleDuplicate ? { possibleDuplicate } : {}),
    };
    delete creating.heldBy;
    // The fence: the mark is written only while this worker holds the job's lock and the job is
    // still at the step it read. A worker paused past its lock stops here and sends nothing.
    // The same step reads the account's hold: a 429 elsewhere since this slot was taken.
    const { result: fenced, heldMs } = await this.#d.fence.mark(job, token, data, creating, this.#d.flow.holdKey);
    if (fenced !== 'ok') return this.#lostBeforeSend(job, data, fenced, log);
    // The "creating" mark is what flags a create re-sent after a crash or failover as a possible
    // duplicate: it must survive a failover before the create goes out.
    await this.#d.replicated?.();
    await this.#d.afterFence?.();
    // Time passed since the fence read the hold (a replica wait): the send reads it again.
    const held = this.#d.replicated || this.#d.afterFence ? undefined : heldMs;
    let answer: AnsweredQuery;
    try {
      answer = await this.#d.api.createQuery(data.plate, data.product, this.#d.flow.send(admission, held));
    } catch (err) {
      if (isError(err, StoppedBeforeSendError)) return this.#unsent(job, token, creating);
      if (isUpstreamError(err) && err.kind === 'rate-limited') this.#refusedSlot.set(err, admission.at);
      if (isUpstreamError(err) && err.kind === 'unrecognised')
        return this.#createUnread(job, token, creating, err, log);
      if (isUpstreamError(err)) {
        const decision = decide(err);
        if (decision.refundCreate) {
          await this.#d.flow.refundCreate(job.id!, data);
          // Back to `create` unless another worker has taken the job over meanwhile.
          await this.#d.fence.write(job, token, creating, { ...creating, step: 'create' });
        } else if (wasSent(err)) {
          // Left, and not refused by the upstream's own answer: it may be billed.
          await this.#d.recorder.untilStored(data.account, () => this.#d.recorder.count(batchOf(data), 'createsSent'));
        }
      }
      throw err;
    }
    const createdAt = this.#now();
    const polling: PlateJobData = {
      ...creating,
      step: 'poll',
      queryId: answer.queryId,
      createdAt,
      pollDeadline: createdAt + this.#d.config.poll.deadlineMs,
      requests: data.requests + 1,
    };
    // The query id is paid for: while Redis waits, a stop that cannot wait writes it to a file.
    const paid = { kind: 'queryId' as const, batchId: data.batchId, plate: data.plate, queryId: answer.queryId };
    // The write that makes "create once" hold: from here on every activation polls this queryId.
    // The create is paid for: while Redis is down or full, wait for it rather than lose the id. A
    // worker that lost its lock while the create was out still stores the id, so whoever holds the
    // job now polls instead of re-sending.
    const kept = await this.#storeCreated(job, creating, polling, paid);
    if (kept !== 'ok') {
      // Another worker took the job over, saw the `creating` mark and sent again (flagged).
      this.#d.lockLoss.report(data.account, job.id, 'create-superseded', {
        batchId: data.batchId,
        queryId: answer.queryId,
      });
      throw new LostJob();
    }
    await this.#d.flow.onAnswer(this.#d.api.quota, log);
    await this.#reportBilling(data, answer, log);
    if (answer.terminal) return this.#finish(job, polling, answer, log);

    // First contact: the one plate in flight is polled early and often (meeting costs one answer
    // time). A person waits for an interactive plate: poll it soon and often rather than at the quantile.
    const learned = (await this.#d.flow.contact.meeting())
      ? firstContactPollDelay(0)
      : await this.#d.learner.firstPollDelay(data.product);
    const delay = data.cls === 'interactive' ? Math.min(learned, this.#d.config.poll.interactiveMs) : learned;
    return this.#pollAt(job, token, createdAt + delay, log);
  }

  /**
   * A create whose account paused or held while it waited to be sent (StoppedBeforeSendError):
   * nothing left, so its slot and cap unit go back, the job to `create`, and it waits the pause out.
   */
  async #unsent(job: PlateJob, token: string | undefined, creating: PlateJobData): Promise<never> {
    await this.#d.flow.refundCreate(job.id!, creating);
    await this.#d.fence.write(job, token, creating, { ...creating, step: 'create' });
    throw Worker.RateLimitError();
  }

  /**
   * What the answer said of its own price, beside the estimate; a lost note costs nothing, so it
   * never fails the job.
   */
  async #reportBilling(data: PlateJobData, answer: AnsweredQuery, log: Logger): Promise<void> {
    if (!answer.billing) return;
    try {
      await this.#d.recorder.reported(batchOf(data), answer.billing);
    } catch (err) {
      log.warn({ err }, 'could not record the price the upstream stated');
    }
  }

  /**
   * A create was made (and paid) and its answer could not be read. The answer is kept with the
   * plate in the write that stores the paid create, so no activation ever sends it again: with a
   * readable id (only its state is new) the plate polls it; without one it waits at step `unread`
   * for settings that read the kept answer (#reread). The account holds (flow.contact.onUnreadable).
   */
  async #createUnread(
    job: PlateJob,
    token: string | undefined,
    creating: PlateJobData,
    err: UnrecognisedAnswerError,
    log: Logger,
  ): Promise<JobResult> {
    const data = job.data;
    const now = this.#now();
    const heldAnswer = this.#kept(err, now);
    const next: PlateJobData =
      err.queryId !== undefined
        ? {
            ...creating,
            step: 'poll',
            queryId: err.queryId,
            createdAt: now,
            pollDeadline: now + this.#d.config.poll.deadlineMs,
            requests: data.requests + 1,
            heldAnswer,
          }
        : { ...creating, step: 'unread', createdAt: now, requests: data.requests + 1, heldAnswer };
    const kept = await this.#storeCreated(job, creating, next);
    if (kept !== 'ok') {
      this.#d.lockLoss.report(data.account, job.id, 'create-superseded', { batchId: data.batchId });
      throw new LostJob();
    }
    await this.#d.flow.onAnswer(this.#d.api.quota, log);
    log.warn(
      { plate: data.plate, why: err.why, ...(err.queryId ? { queryId: err.queryId } : {}) },
      'a paid create was answered in a shape vqb cannot read: its answer is kept with the plate, which waits',
    );
    if (await this.#d.flow.contact.onUnreadable(err, log)) throw Worker.RateLimitError();
    return this.#pollAt(job, token, now + (await this.#d.learner.firstPollDelay(data.product)), log);
  }

  /**
   * A paid create's answer stored over its `creating` mark (a query id, or an answer kept unread):
   * no lock needed, only that nobody moved past this send; waits out Redis and, where replicas
   * confirm paid writes, is made again until one holds it (made again after its success, it finds
   * the step moved on: its first answer stands). The same step counts the create, whoever stores
   * it, and gives the job its poll priority.
   */
  #storeCreated(
    job: PlateJob,
    creating: PlateJobData,
    next: PlateJobData,
    paid?: Omit<HeldPaid, 'account' | 'since'>,
  ): Promise<FenceResult> {
    const data = job.data;
    const write = () =>
      this.#d.fence.write(job, undefined, creating, next, {
        orLostMark: true,
        count: this.#d.recorder.counting(batchOf(data), 'creates', 'createsSent'),
        priority: pollPriority(data.cls),
      });
    return this.#d.recorder.untilStored(data.account, write, paid, (again) => again !== 'ok');
  }

  /** What is kept of an unreadable answer with its plate (and for the account's hold). */
  #kept(err: UnrecognisedAnswerError, at: number): KeptAnswer {
    return { operation: err.operation, status: err.status, answer: err.answer, why: err.why, at };
  }

  /**
   * Step `unread`: a paid create whose answer had no id vqb could read. Its kept answer is read
   * again with the settings in force; read, the plate polls the id (never a new create); still
   * unreadable, the account holds again and the plate waits.
   */
  async #reread(job: PlateJob, token: string | undefined, log: Logger): Promise<JobResult> {
    const data = job.data;
    const kept = data.heldAnswer;
    let queryId: string | undefined;
    try {
      if (kept === undefined) throw new Error('a job at step unread without its kept answer');
      queryId = this.#d.api.reread(kept).queryId;
    } catch (err) {
      if (!isUpstreamError(err) || err.kind !== 'unrecognised') throw err;
      // The id reads now and only the create's state is new: the polls will say what it means.
      if (err.queryId === undefined) {
        await this.#d.flow.contact.onUnreadable(err, log);
        throw Worker.RateLimitError();
      }
      queryId = err.queryId;
    }
    const now = this.#now();
    const polling: PlateJobData = {
      ...data,
      step: 'poll',
      queryId,
      createdAt: data.createdAt ?? now,
      pollDeadline: now + this.#d.config.poll.deadlineMs,
    };
    delete polling.heldAnswer;
    if ((await this.#d.fence.write(job, token, data, polling)) !== 'ok') {
      this.#d.lockLoss.report(data.account, job.id, 'nothing-sent', { batchId: data.batchId });
      throw new LostJob();
    }
    log.info(
      { plate: data.plate, queryId },
      'a paid create read again with the settings in force: polled, not created again',
    );
    // Polled even when the kept answer says it finished: what was kept is cut to a few KB, a poll has it whole.
    return this.#pollAt(job, token, now, log);
  }

  /**
   * The fence refused the `creating` mark: nothing was sent. The spending-cap unit this worker
   * reserved is given back; its in-flight slot too when the plate is finished already (the holder
   * released it before this worker took it again). With the lock still held but the step moved on
   * (a rerun), the job goes back to be read afresh.
   */
  async #lostBeforeSend(
    job: PlateJob,
    data: PlateJobData,
    fenced: Exclude<FenceResult, 'ok'>,
    log: Logger,
  ): Promise<never> {
    await this.#d.flow.refundCap(data);
    await this.#d.recorder.finishedBefore(job);
    if (fenced === 'moved-on') {
      log.info(
        { step: data.step },
        'the job moved on while this worker waited for its slot: read afresh, nothing sent',
      );
      throw Worker.RateLimitError();
    }
    this.#d.lockLoss.report(data.account, job.id, 'nothing-sent', {
      batchId: data.batchId,
      ...(fenced === 'gone' ? { removed: true } : {}),
    });
    throw new LostJob();
  }

  /** A BullMQ "Missing lock" error means another worker holds the job: say so once, leave the job alone. */
  #rethrowLockLoss(err: unknown, job: PlateJob, when: LockLossWhen): never {
    if (lockErrorJob(err) === undefined) throw err;
    this.#d.lockLoss.report(job.data.account, job.id, when, { batchId: job.data.batchId });
    throw new LostJob();
  }

  /** `admitted`: called once the poll's slot is taken or refused (a poll that waited in the room leaves it). */
  #poll(job: PlateJob, token: string | undefined, log: Logger, admitted?: () => void): Promise<JobResult> {
    const attributes = { ...jobAttributes(job.data), 'vqb.poll.number': job.data.polls + 1 };
    return spanned(SPAN.poll, attributes, () => this.#pollOnce(job, token, log, admitted), true);
  }

  async #pollOnce(job: PlateJob, token: string | undefined, log: Logger, admitted?: () => void): Promise<JobResult> {
    const data = job.data;
    const queryId = data.queryId!;
    let verdict: SendAdmission;
    try {
      verdict = await this.#d.flow.admitPoll(data.cls, this.#d.closing?.(data.batchId));
    } finally {
      admitted?.();
    }
    const admission = await this.#admitted(verdict, job, token);
    if (await this.#d.flow.stopped()) throw Worker.RateLimitError();
    let answer: AnsweredQuery;
    try {
      answer = await this.#d.api.getQuery(queryId, this.#d.flow.send(admission));
    } catch (err) {
      if (isError(err, StoppedBeforeSendError)) throw Worker.RateLimitError();
      if (isUpstreamError(err) && err.kind === 'rate-limited') this.#refusedSlot.set(err, admission.at);
      if (isUpstreamError(err) && err.kind === 'unrecognised') return this.#pollUnread(job, token, err, log);
      if (isUpstreamError(err) && wasSent(err) && err.kind !== 'rate-limited')
        await this.#d.recorder.count(batchOf(data), 'pollsSent');
      throw err;
    }
    const now = this.#now();
    await this.#reportBilling(data, answer, log);
    const polled: PlateJobData = { ...data, polls: data.polls + 1, requests: data.requests + 1 };
    if (data.heldAnswer !== undefined) {
      // Read at last (the settings changed, or the state went away): the hold's time is not the query's.
      delete polled.heldAnswer;
      polled.pollDeadline = Math.max(data.pollDeadline ?? 0, now + this.#d.config.poll.deadlineMs);
    }
    // The answer is paid for: it is counted in the write that stores what it said (the outcome,
    // or the pending poll), made before anything else that could fail and send the poll again.
    // Then the poll schedule learns from it and the pace hears the quota it reported.
    // The plate that meets the upstream (first contact) is polled on a schedule of its own: its
    // polls say nothing of the learned first-poll delay.
    const meeting = await this.#d.flow.contact.meeting();
    const learn = async () => {
      // A finished query says how long it took, when the upstream tells (answeredWithin).
      const took = answer.terminal ? answeredWithin(answer.result) : undefined;
      if (data.polls === 0 && !meeting)
        this.#d.learner.observe(data.product, !answer.terminal, now - (data.createdAt ?? now), took);
      if (took !== undefined) this.#d.learner.stated(data.product, took);
      await this.#d.flow.onAnswer(this.#d.api.quota, log);
    };
    // At least one poll is always made once the deadline has passed (the account may have been
    // paused for hours): only a query still pending after that poll times out.
    const timedOut = !answer.terminal && polled.pollDeadline !== undefined && now >= polled.pollDeadline;
    if (answer.terminal || timedOut) {
      try {
        if (answer.terminal) return await this.#finish(job, polled, answer, log, POLL_COUNT);
        const message = `query ${queryId} still ${answer.status || 'pending'} after ${polled.polls} polls`;
        return await this.#failWith(job, polled, { code: 'POLL_TIMEOUT', message }, log, undefined, POLL_COUNT);
      } finally {
        await learn();
      }
    }
    // A stale worker's answer must not overwrite what the job's holder wrote since.
    const count = this.#d.recorder.counting(batchOf(data), ...POLL_COUNT);
    if ((await this.#d.fence.write(job, token, data, { ...polled, lastPendingAt: now }, { count })) !== 'ok') {
      this.#d.lockLoss.report(data.account, job.id, 'answer-dropped', { batchId: data.batchId, queryId });
      throw new LostJob();
    }
    await learn();
    const next = meeting
      ? firstContactPollDelay(now - (data.createdAt ?? now))
      : data.cls === 'interactive'
        ? this.#d.config.poll.interactiveMs
        : await this.#againAfter(polled, now);
    return this.#pollAt(job, token, Math.min(now + next, polled.pollDeadline ?? Infinity), log);
  }

  /**
   * The wait before the next poll of a query found pending: the backoff, or for the second poll
   * the stated answers' point past the time elapsed when that comes sooner (pendingPollDelay).
   */
  async #againAfter(polled: PlateJobData, now: number): Promise<number> {
    const backoff = nextPollDelay(polled.polls, this.#d.config.poll, this.#random);
    if (polled.polls !== 1 || polled.createdAt === undefined) return backoff;
    const sooner = await this.#d.learner.pendingPollDelay(polled.product, now - polled.createdAt);
    return sooner === undefined ? backoff : Math.min(backoff, sooner);
  }

  /**
   * A poll answered with no state vqb can read, or one in no list: the plate never fails for it.
   * The answer is kept with the plate (counted as the poll it was); the account holds (at once,
   * or at the third such answer when only a state is new), or the plate polls again later.
   */
  async #pollUnread(
    job: PlateJob,
    token: string | undefined,
    err: UnrecognisedAnswerError,
    log: Logger,
  ): Promise<JobResult> {
    const data = job.data;
    const now = this.#now();
    const polled: PlateJobData = {
      ...data,
      polls: data.polls + 1,
      requests: data.requests + 1,
      lastPendingAt: now,
      heldAnswer: this.#kept(err, now),
    };
    const count = this.#d.recorder.counting(batchOf(data), ...POLL_COUNT);
    if ((await this.#d.fence.write(job, token, data, polled, { count })) !== 'ok') {
      this.#d.lockLoss.report(data.account, job.id, 'answer-dropped', { batchId: data.batchId, queryId: data.queryId });
      throw new LostJob();
    }
    await this.#d.flow.onAnswer(this.#d.api.quota, log);
    if (await this.#d.flow.contact.onUnreadable(err, log)) throw Worker.RateLimitError();
    return this.#pollAt(job, token, now + nextPollDelay(polled.polls, this.#d.config.poll, this.#random), log);
  }

  /**
   * Acts on the flow control's answer: returns it when the request may go out, throws what BullMQ
   * should do otherwise.
   */
  async #admitted(
    // A create whose plate is finished already ends in #create before it gets here.
    admission: SendAdmission,
    job: PlateJob,
    token: string | undefined,
  ): Promise<Extract<Admission, { go: true }>> {
    if (admission.go) return admission;
    switch (admission.why) {
      case 'later':
        // Back to the head of its priority, no attempt spent; no worker asks again before the slot is near.
        await this.#d.flow.stopTaking(admission.retryInMs);
        throw Worker.RateLimitError();
      case 'inflight':
        return this.#sleepUntil(job, token, this.#now() + admission.retryInMs);
      case 'cap':
        if ((await this.#d.fence.write(job, token, job.data, { ...job.data, heldBy: admission.heldBy })) !== 'ok') {
          this.#d.lockLoss.report(job.data.account, job.id, 'nothing-sent', { batchId: job.data.batchId });
          throw new LostJob();
        }
        return this.#sleepUntil(job, token, admission.until);
    }
  }

  /**
   * The job's query id is stored: poll it at `at`. Soon enough and with room, in this worker (see
   * POLL_WAIT_HERE_MS); otherwise, or when the wait overran or the worker stops, from BullMQ's
   * delayed set. Either way a crash loses nothing: the next activation polls the stored id.
   */
  async #pollAt(job: PlateJob, token: string | undefined, at: number, log: Logger): Promise<JobResult> {
    // The step that led here (its create or poll) is over: its span ends now, not after the wait.
    endStep();
    const wait = Math.max(0, at - this.#now());
    const signal = this.#stop.signal;
    const room = this.#d.pollRoom;
    if (token !== undefined && wait <= POLL_WAIT_HERE_MS && !signal.aborted && room?.enter()) {
      const planned = this.#clock.monotonic() + wait;
      let slept = false;
      try {
        // Due, it goes at the process's next wake for one of its account's slots (flow.untilDue).
        await this.#d.flow.untilDue(planned, signal);
        slept = true;
      } catch {
        // The worker is stopping: the delayed set takes the job below.
      }
      if (slept && !signal.aborted && this.#clock.monotonic() - planned <= OVERSLEPT_MS) {
        // The poll keeps its place in the room until its slot is taken: woken, it waits in the
        // process's line for a slot, and were it a job at work meanwhile, BullMQ would fetch
        // nothing while polls come due, and a closing batch's creates, which go before its polls
        // in that line (queue/feeder.ts closingUntil), would stay in the queue behind them.
        let left = false;
        const leave = () => {
          if (left) return;
          left = true;
          room.leave();
        };
        try {
          return await (this.#activation.get(job) ?? now)(() => this.#poll(job, token, log, leave));
        } finally {
          leave();
        }
      }
      room.leave();
    }
    return this.#sleepUntil(job, token, at, 'answer-stored');
  }

  async #sleepUntil(
    job: PlateJob,
    token: string | undefined,
    at: number,
    when: LockLossWhen = 'nothing-sent',
  ): Promise<never> {
    try {
      await job.moveToDelayed(at, token);
    } catch (err) {
      this.#rethrowLockLoss(err, job, when);
    }
    throw new DelayedError();
  }

  async #finish(
    job: PlateJob,
    data: PlateJobData,
    answer: QueryOutcome,
    log: Logger,
    count: CostField[] = [],
  ): Promise<JobResult> {
    // An id, then a known final state: the account's answers are understood (first contact ends),
    // the schedule of polls seeded with this plate's answer time first when a poll read it.
    await this.#d.flow.contact.understood(
      answer.shape,
      log,
      data.polls > 0 ? () => this.#seed(data, answer, log) : undefined,
    );
    if (answer.state === 'completed') {
      if ((await this.#d.recorder.record(job, data, undefined, answer.result, {}, count)) === 'batch-finished')
        log.info('batch finished');
      return { status: 'done', queryId: data.queryId! };
    }
    const reason = (answer.result as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    const error: OutcomeError = {
      code: typeof reason?.code === 'string' ? reason.code : 'QUERY_FAILED',
      message: typeof reason?.message === 'string' ? reason.message : `the upstream query ended ${answer.status}`,
    };
    return this.#failWith(job, data, error, log, answer.result, count);
  }

  /**
   * The first plate this process read end to end while its account met the upstream, answered at
   * a poll: its answer time is where the poll schedule starts (the upstream's own time when it
   * says, else the time from create to this answer), never the slow-end prior; stored only where
   * nothing was yet (PollLearner.seed), so a plate another process read first changes nothing.
   * An estimate's input: a failure to store it is only logged.
   */
  async #seed(data: PlateJobData, answer: QueryOutcome, log: Logger): Promise<void> {
    const took = answeredWithin(answer.result) ?? this.#now() - (data.createdAt ?? this.#now());
    try {
      await this.#d.learner.seed(data.product, took);
    } catch (err) {
      log.warn({ err }, 'could not start the poll schedule at the first answer time');
    }
  }

  async #onUpstreamError(job: PlateJob, err: AnyUpstreamError, log: Logger): Promise<never> {
    const decision = decide(err);
    // Reachability, shared by every process: no answer (or a 5xx) counts toward "unreachable"; any
    // other answer ends it.
    if (isUnreachable(err)) await this.#d.flow.onUnreachable(err, log);
    else if (err.status > 0) await this.#d.flow.reached(log);
    switch (decision.action) {
      case 'pause-account':
        await this.#d.flow.onKeyFailure(err, log);
        // Back to waiting with no attempt spent; the paused queue holds it until `vqb resume`.
        throw Worker.RateLimitError();
      case 'wait':
        await this.#d.recorder.count(batchOf(job.data), 'rateLimited');
        if (err.kind === 'rate-limited')
          await this.#d.flow.onRateLimited(err, decision.waitReason ?? 'rate_limit', log, this.#refusedSlot.get(err));
        throw Worker.RateLimitError();
      case 'retry':
        if (this.#isLastAttempt(job)) {
          await this.#d.recorder.record(job, job.data, this.#errorOf(err));
          log.info({ code: err.code, attempts: job.attemptsMade + 1 }, 'plate failed after its last attempt');
        }
        throw err;
      case 'fail':
        return this.#failWith(job, job.data, this.#errorOf(err), log);
      case 'hold-answer':
        // Read where it was answered (#createUnread, #pollUnread); reaching here is a bug: hold, never fail.
        if (err.kind === 'unrecognised') await this.#d.flow.contact.onUnreadable(err, log);
        throw Worker.RateLimitError();
    }
  }

  #errorOf(err: AnyUpstreamError): OutcomeError {
    return { code: err.code, message: err.message, ...(err.status > 0 ? { httpStatus: err.status } : {}) };
  }

  async #failWith(
    job: PlateJob,
    data: PlateJobData,
    error: OutcomeError,
    log: Logger,
    result?: unknown,
    count: CostField[] = [],
  ): Promise<never> {
    if ((await this.#d.recorder.record(job, data, error, result, {}, count)) === 'batch-finished')
      log.info('batch finished');
    log.info({ code: error.code, plate: data.plate }, 'plate failed');
    throw new UnrecoverableError(`${error.code}: ${error.message}`);
  }

  #isLastAttempt(job: PlateJob): boolean {
    return job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  }
}

const now: Within = (fn) => fn();
