// The job processor: CREATE → POLL → DONE, one upstream request per activation at most, so the
// BullMQ limiter paces creates and polls together. Between polls the job waits in `delayed`
// holding no worker slot. The step and the queryId are written to the job the moment a create
// answers, so a crash, a stall or a retry after that point polls the same query instead of paying
// for a new one.
import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../src/config.js';
import { noMetrics, type WorkerMetrics } from '../src/metrics.js';
import type { Budget } from '../src/queue/budget.js';
import type { CostLedger } from '../src/queue/costs.js';
import type { InFlight } from '../src/queue/inflight.js';
import { parkWaitingCreates } from '../src/queue/parking.js';
import type { ReuseStore } from '../src/queue/reuse.js';
import type { LineControl } from '../src/queue/line.js';
import type { OutcomeStore } from '../src/queue/outcomes.js';
import { PRIORITY, type PlateQueue } from '../src/queue/plate-queue.js';
import type { VqbKeys } from '../src/queue/redis.js';
import type { Outcome, OutcomeError, PlateJobData } from '../src/queue/types.js';
import { UpstreamError } from '../src/upstream/errors.js';
import type { QuotaSnapshot } from '../src/upstream/client.js';
import { classifyStatus, type QueryOutcome } from '../src/upstream/response.js';
import { backoffDelay } from '../src/upstream/timing.js';
import { actionFor, adviceFor } from './actions.js';
import { nextPollDelay, type PollLearner } from './poll-schedule.js';

/** What the processor needs of the upstream client (an interface, so tests may wrap it). */
export interface QueryApi {
  createQuery(plate: string, product?: string): Promise<QueryOutcome>;
  getQuery(queryId: string): Promise<QueryOutcome>;
  readonly quota: QuotaSnapshot | undefined;
}

export interface ProcessorDeps {
  config: Pick<Config, 'poll' | 'recreateUncertain' | 'attempts'>;
  api: QueryApi;
  redis: Redis;
  keys: VqbKeys;
  outcomes: OutcomeStore;
  inflight: InFlight;
  line: LineControl;
  learner: PollLearner;
  ledger: CostLedger;
  budget: Budget;
  reuse: ReuseStore;
  queue: PlateQueue;
  logger: Logger;
  /** Smallest gap between two job starts (the pacing interval): waits shorter than it are not worth a pause. */
  pacingMs: number;
  /** The configured rate window (60 s for 60/min): budget resets within it are left to the pacing. */
  rateWindowMs: number;
  metrics?: WorkerMetrics;
  now?: () => number;
  random?: () => number;
}

export type JobResult = { status: 'done' | 'exists'; queryId?: string };

type PlateJob = Job<PlateJobData, unknown, string>;

/** Errors BullMQ acts on itself; they pass through untouched. */
function isControlFlow(err: unknown): boolean {
  const name = (err as Error | undefined)?.name;
  const message = (err as Error | undefined)?.message;
  return name === 'DelayedError' || name === 'UnrecoverableError' || name === 'WaitingError' || message === 'bullmq:rateLimitExceeded';
}

/** A create that failed with one of these certainly did not reach the upstream, or was answered. */
function createCertainlyNotMade(err: unknown): boolean {
  if (!(err instanceof UpstreamError)) return false;
  return err.status > 0 || err.code === 'CONNECTION_REFUSED' || err.code === 'CONNECT_TIMEOUT';
}

export class PlateProcessor {
  readonly #d: ProcessorDeps;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #metrics: WorkerMetrics;
  /** Saw a 429 without a hint lately: the shared streak counter must be reset on the next success. */
  #inStreak = false;
  /** Per-batch settings read at most once a second per process. */
  readonly #batchSettings = new Map<string, { at: number; reuseWithinMs: number }>();
  /** The shared adaptive spacing as last seen here (ms), and when it was read. */
  #spacing = { ms: 0, at: 0 };
  /** Batches this process already took off the queue after they reached their create cap. */
  readonly #parking = new Set<string>();

  constructor(deps: ProcessorDeps) {
    this.#d = deps;
    this.#now = deps.now ?? Date.now;
    this.#random = deps.random ?? Math.random;
    this.#metrics = deps.metrics ?? noMetrics;
  }

  readonly process = async (job: PlateJob, token?: string): Promise<JobResult> => {
    const data = job.data;
    const log = this.#d.logger.child({ batchId: data.batchId, jobId: job.id, ...(data.queryId ? { queryId: data.queryId } : {}) });
    // A job added again after its outcome was stored (resumed batch, removed job) costs nothing.
    if (await this.#d.outcomes.has(data.batchId, data.plate)) {
      await this.#d.inflight.release(job.id!, data.batchId);
      return { status: 'exists' };
    }
    try {
      return data.step === 'poll' ? await this.#poll(job, token, log) : await this.#create(job, token, log);
    } catch (err) {
      if (isControlFlow(err)) throw err;
      if (err instanceof UpstreamError) return await this.#onUpstreamError(job, err, log);
      // Anything else (Redis blips, bugs) is retried by BullMQ; on the last attempt, keep a record.
      if (this.#isLastAttempt(job)) {
        await this.#record(job, job.data, { code: 'INTERNAL_ERROR', message: (err as Error).message ?? String(err) }, log);
      }
      throw err;
    }
  };

  async #create(job: PlateJob, token: string | undefined, log: Logger): Promise<JobResult> {
    const data = job.data;
    let possibleDuplicate = data.possibleDuplicate === true;
    if (data.step === 'creating') {
      // The create was sent and its answer never stored: the upstream may have made (and charged) it.
      if (!this.#d.config.recreateUncertain) {
        return this.#failWith(
          job,
          data,
          { code: 'CREATE_UNCERTAIN', message: 'a create was sent and its answer was lost; not re-sent (VQ_RECREATE_UNCERTAIN=false): check the upstream for this plate' },
          log,
        );
      }
      possibleDuplicate = true;
      log.warn({ plate: data.plate }, 're-sending a create whose answer was lost: possible duplicate charge');
    }
    const now = this.#now();
    const reuseWithinMs = await this.#reuseWindow(data.batchId);
    const stored = await this.#d.reuse.find(data.plate, reuseWithinMs, now);
    if (stored) {
      const reused: PlateJobData = { ...data, ...(stored.queryId ? { queryId: stored.queryId } : {}) };
      await this.#record(job, reused, undefined, log, stored.result, { reused: true, reusedAgeMs: stored.ageMs });
      await this.#d.ledger.count(data.batchId, 'reused');
      return { status: 'done', ...(stored.queryId ? { queryId: stored.queryId } : {}) };
    }
    if (!(await this.#d.inflight.acquire(job.id!, data.batchId, now))) {
      // Cap reached: wait a little without holding a slot; polls (higher priority) drain the pipeline.
      await job.moveToDelayed(now + Math.max(this.#d.pacingMs, 250), token);
      throw new DelayedError();
    }
    const verdict = await this.#d.budget.reserve(data.batchId);
    if (verdict !== 'ok') {
      await this.#d.inflight.release(job.id!, data.batchId);
      return this.#holdForBudget(job, token, verdict, log);
    }
    const creating: PlateJobData = { ...data, step: 'creating', creatingAt: now, ...(possibleDuplicate ? { possibleDuplicate } : {}) };
    await job.updateData(creating);

    let answer: QueryOutcome;
    try {
      answer = await this.#d.api.createQuery(data.plate, data.product);
    } catch (err) {
      if (createCertainlyNotMade(err)) {
        await job.updateData({ ...creating, step: 'create' });
        await this.#d.inflight.release(job.id!, data.batchId);
        await this.#d.budget.refund(data.batchId);
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
    // The write that makes "create once" hold: from here on every activation polls this queryId.
    await job.updateData(polling);
    await this.#d.ledger.count(data.batchId, 'creates');
    await this.#afterAnswer(log);
    if (answer.terminal) return this.#finish(job, polling, answer, log);

    const delay = await this.#d.learner.firstPollDelay(data.product);
    await job.changePriority({ priority: PRIORITY.poll });
    await job.moveToDelayed(createdAt + delay, token);
    throw new DelayedError();
  }

  async #poll(job: PlateJob, token: string | undefined, log: Logger): Promise<JobResult> {
    const data = job.data;
    const queryId = data.queryId!;
    const answer = await this.#d.api.getQuery(queryId);
    const now = this.#now();
    const polled: PlateJobData = { ...data, polls: data.polls + 1, requests: data.requests + 1 };
    await this.#d.ledger.count(data.batchId, 'polls');
    if (data.polls === 0) await this.#d.learner.observe(data.product, !answer.terminal, now - (data.createdAt ?? now));
    await this.#afterAnswer(log);
    if (answer.terminal) return this.#finish(job, polled, answer, log);

    if (!classifyStatus(answer.status).known && answer.status !== '') {
      log.debug({ status: answer.status }, 'unknown query status, treated as pending');
    }
    // At least one poll is always made once the deadline has passed (the line may have been paused
    // for hours): only a query still pending after that poll times out.
    if (data.pollDeadline !== undefined && now >= data.pollDeadline) {
      return this.#failWith(job, polled, { code: 'POLL_TIMEOUT', message: `query ${queryId} still ${answer.status || 'pending'} after ${polled.polls} polls` }, log);
    }
    const at = Math.min(now + nextPollDelay(polled.polls, this.#d.config.poll, this.#random), data.pollDeadline ?? Infinity);
    await job.updateData({ ...polled, lastPendingAt: now });
    await job.moveToDelayed(at, token);
    throw new DelayedError();
  }

  async #finish(job: PlateJob, data: PlateJobData, answer: QueryOutcome, log: Logger): Promise<JobResult> {
    if (answer.state === 'completed') {
      await this.#record(job, data, undefined, log, answer.result);
      return { status: 'done', queryId: data.queryId! };
    }
    const reason = (answer.result as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    const error: OutcomeError = {
      code: typeof reason?.code === 'string' ? reason.code : 'QUERY_FAILED',
      message: typeof reason?.message === 'string' ? reason.message : `the upstream query ended ${answer.status}`,
    };
    return this.#failWith(job, data, error, log, answer.result);
  }

  async #onUpstreamError(job: PlateJob, err: UpstreamError, log: Logger): Promise<never> {
    const data = job.data;
    switch (actionFor(err)) {
      case 'pause-line': {
        if (await this.#d.line.pauseForKey(err.code, `${err.message} — ${adviceFor(err)}`)) {
          log.fatal({ code: err.code, status: err.status }, `line paused: ${adviceFor(err)}`);
        }
        // Back to waiting with no attempt spent; the paused queue holds it until `vqb resume`.
        throw Worker.RateLimitError();
      }
      case 'wait': {
        await this.#d.ledger.count(data.batchId, 'rateLimited');
        this.#spacing = { ms: await this.#d.line.adaptSpacing('429', this.#d.pacingMs), at: this.#now() };
        const hinted = (err as { retryAfterMs?: number }).retryAfterMs;
        const ms = hinted ?? (await this.#noHintBackoff());
        const reason = ms > 10 * 60_000 || /quota|daily|monthly/i.test(err.message) ? 'quota' : 'rate_limit';
        if (await this.#d.line.limitFor(ms, reason)) {
          this.#metrics.waited(reason, ms);
          // A sub-second wait is the adaptive spacing at work, not news; a longer one is a decision.
          const line = { code: err.code, waitMs: ms, reason, until: new Date(this.#now() + ms).toISOString(), spacingMs: Math.round(this.#spacing.ms) };
          if (ms >= 1_000) log.warn(line, `upstream asked to wait: all workers hold for ${ms} ms`);
          else log.debug(line, 'upstream asked to wait');
        }
        throw Worker.RateLimitError();
      }
      case 'retry': {
        if (this.#isLastAttempt(job)) {
          await this.#record(job, data, this.#errorOf(err), log);
          log.info({ code: err.code, attempts: job.attemptsMade + 1 }, 'plate failed after its last attempt');
        }
        throw err;
      }
      case 'fail':
        return this.#failWith(job, data, this.#errorOf(err), log);
    }
  }

  #errorOf(err: UpstreamError): OutcomeError {
    return { code: err.code, message: err.message, ...(err.status > 0 ? { httpStatus: err.status } : {}) };
  }

  async #failWith(job: PlateJob, data: PlateJobData, error: OutcomeError, log: Logger, result?: unknown): Promise<never> {
    await this.#record(job, data, error, log, result);
    log.info({ code: error.code, plate: data.plate }, 'plate failed');
    throw new UnrecoverableError(`${error.code}: ${error.message}`);
  }

  async #record(job: PlateJob, data: PlateJobData, error: OutcomeError | undefined, log: Logger, result?: unknown, extra: Partial<Outcome> = {}): Promise<void> {
    const outcome: Outcome = {
      batchId: data.batchId,
      plate: data.plate,
      status: error ? 'failed' : 'done',
      ...(data.queryId ? { queryId: data.queryId } : {}),
      ...(result !== undefined ? { result } : {}),
      ...(error ? { error } : {}),
      enqueuedAt: job.timestamp,
      ...(data.createdAt ? { createdAt: data.createdAt } : {}),
      finishedAt: this.#now(),
      requests: data.requests,
      polls: data.polls,
      attempts: job.attemptsMade + 1,
      ...(data.possibleDuplicate ? { possibleDuplicate: true } : {}),
      ...extra,
    };
    const recorded = await this.#d.outcomes.record(outcome, job.id!);
    if (recorded !== 'exists') {
      this.#metrics.finished(outcome);
      if (outcome.possibleDuplicate) await this.#d.ledger.countDay('possibleDuplicates');
      if (outcome.status === 'done' && !outcome.reused)
        await this.#d.reuse.save(data.plate, { ...(data.queryId ? { queryId: data.queryId } : {}), result, at: outcome.finishedAt });
    }
    if (recorded === 'batch-finished') log.info('batch finished');
  }

  #isLastAttempt(job: PlateJob): boolean {
    return job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  }

  /**
   * After any answer: when the upstream says the budget is gone until a reset further away than
   * one rate window (a daily quota), every worker holds until then instead of drawing 429s.
   * Resets within the window are left to the pacing and, if it is wrong, to the 429 path: at
   * steady state a smooth pace runs the window's budget to 0 on every request, and
   * X-RateLimit-Reset has whole-second precision, so pausing until it would waste up to a second
   * each time (measured: pacing fell to 0.53 of the limit).
   */
  async #afterAnswer(log: Logger): Promise<void> {
    if (this.#inStreak) {
      this.#inStreak = false;
      await this.#d.redis.del(this.#d.keys.streak429);
    }
    await this.#adaptSpacing();
    const quota = this.#d.api.quota;
    this.#metrics.quota(quota);
    if (quota?.remaining !== 0 || quota.resetAt === undefined) return;
    const wait = quota.resetAt - this.#now();
    // +1 s: X-RateLimit-Reset is rounded to whole seconds, so a slot freeing 50 ms from now may read
    // as a reset up to a second later.
    if (wait <= Math.max(this.#d.pacingMs, this.#d.rateWindowMs) + 1_000) return;
    const reason = wait > 10 * 60_000 ? 'quota' : 'rate_limit';
    if (await this.#d.line.limitFor(wait, reason)) {
      this.#metrics.waited(reason, wait);
      log.info({ waitMs: wait, reason, until: new Date(quota.resetAt).toISOString() }, 'upstream budget used up: all workers hold until it resets');
    }
  }

  /** While the shared spacing is above zero, every answer eases it and holds the next start. */
  async #adaptSpacing(): Promise<void> {
    const now = this.#now();
    if (now - this.#spacing.at > 1_000) this.#spacing = { ms: await this.#d.line.extraSpacing(), at: now };
    if (this.#spacing.ms > 0) this.#spacing = { ms: await this.#d.line.adaptSpacing('ok', this.#d.pacingMs), at: now };
  }

  /** A 429 with no hint at all: exponential backoff with jitter, shared by all workers. */
  async #noHintBackoff(): Promise<number> {
    this.#inStreak = true;
    const streak = await this.#d.redis.incr(this.#d.keys.streak429);
    await this.#d.redis.pexpire(this.#d.keys.streak429, 10 * 60_000);
    return backoffDelay(streak - 1, 1_000, 5 * 60_000, this.#random);
  }

  async #reuseWindow(batchId: string): Promise<number> {
    const now = this.#now();
    const cached = this.#batchSettings.get(batchId);
    if (cached && now - cached.at < 1_000) return cached.reuseWithinMs;
    const reuseWithinMs = Number((await this.#d.redis.hget(this.#d.keys.batch(batchId), 'reuseWithinMs')) ?? 0);
    this.#batchSettings.set(batchId, { at: now, reuseWithinMs });
    return reuseWithinMs;
  }

  /**
   * A spending cap is reached: the plate waits, it never fails. A batch cap parks the batch's
   * creates until the cap is raised; a key-wide cap holds every create until its UTC reset.
   */
  async #holdForBudget(job: PlateJob, token: string | undefined, verdict: 'batch' | 'day' | 'month', log: Logger): Promise<never> {
    const data = job.data;
    const now = this.#now();
    if (verdict === 'batch') {
      await this.#d.redis.multi().sadd(this.#d.keys.parked(data.batchId), data.plate).hset(this.#d.keys.batch(data.batchId), 'blocked', 'budget').exec();
      // Far in the future: `vqb budget` promotes it when the cap is raised.
      await job.moveToDelayed(now + 30 * 86_400_000, token);
      if (!this.#parking.has(data.batchId)) {
        this.#parking.add(data.batchId);
        log.info({ batchId: data.batchId }, 'batch reached its create cap: its remaining creates wait until the cap is raised (vqb budget)');
        void parkWaitingCreates({ queue: this.#d.queue, redis: this.#d.redis, keys: this.#d.keys, outcomes: this.#d.outcomes }, data.batchId)
          .catch((err: unknown) => log.error({ err }, "could not park the batch's waiting creates"))
          .finally(() => this.#parking.delete(data.batchId));
      }
      throw new DelayedError();
    }
    const until = this.#d.budget.resetsAt(verdict);
    if ((await this.#d.redis.hset(this.#d.keys.line, 'budgetUntil', String(until), 'budgetReason', verdict)) > 0) {
      log.info({ reason: verdict, until: new Date(until).toISOString() }, `spending cap per ${verdict} reached: creates wait for the reset (polls go on)`);
    }
    await job.updateData({ ...data, budgetBlocked: true });
    await job.moveToDelayed(until, token);
    throw new DelayedError();
  }
}
