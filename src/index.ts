// The package's main export: vqb as a library.
//
//   const vqb = await createVqb({ settings: { VQ_BASE_URL, VQ_API_KEY_FILE }, workers: true });
//   const batch = await vqb.enqueue(['ABC1D23', { plate: 'XYZ9876', customer: '42' }], { metadata: { by: 'me' } });
//   await batch.done();
//   for await (const row of batch.results()) console.log(row.plate, row.status);
//   await vqb.close();
//
// A batch looks the same here as in the HTTP API and `vqb status --json` (BatchView), and
// `enqueue` takes the options the API's JSON body does, checked by the same schema.

import type { z } from 'zod';
import { startWorker, type WorkerHandle } from '../workers/worker.js';
import { clock } from './clock.js';
import { type Config, loadConfig, type Overrides } from './config.js';
import { OptionsError } from './errors.js';
import { type Logger, silentLogger } from './logger.js';
import type { DeadlineView } from './plans/deadline.js';
import { batchContext } from './presenters/batch-context.js';
import { batchView } from './presenters/batch-view.js';
import type { CostEstimate } from './producers/dry-run.js';
import { enqueue, estimate } from './producers/enqueue.js';
import type { PlateInput } from './producers/list.js';
import type { AccountLineState } from './queue/line.js';
import { type RerunResult, rerunFailed } from './queue/rerun.js';
import { type BatchView, EnqueueOptions } from './schemas/batch.js';
import { EXPORT_FORMATS } from './schemas/result-row.js';
import { openQueueServices, type QueueServices } from './services.js';
import { batchExportSource } from './sinks/batch-source.js';
import { exportBatch, fileSinkFor } from './sinks/export.js';
import type { ExportFormat, ExportResult, ExportRow } from './sinks/types.js';

export { type Config, loadConfig, type Overrides } from './config.js';
export {
  BatchNotFoundError,
  ConfigError,
  InputError,
  isVqbError,
  OptionsError,
  RedisFullError,
  RedisUnavailableError,
  RedisUnreplicatedError,
  VqbError,
} from './errors.js';
export type { DeadlineView } from './plans/deadline.js';
export { checkPlate, normalizePlate, toMercosul } from './plates.js';
export type { CostEstimate } from './producers/dry-run.js';
export type { PlateInput, PlateRow } from './producers/list.js';
export type { AccountLineState } from './queue/line.js';
export type { Outcome, PriorityClass } from './queue/types.js';
export type { BatchCounts, BatchOptions, BatchView, EnqueueOptions, Waiting } from './schemas/batch.js';
export type { ResultRow, UpstreamResult } from './schemas/result-row.js';
export { type SimulatorHandle, type SimulatorOptions, startSimulator } from './simulator/index.js';
export type { ExportFormat, ExportResult, ExportRow, ExportSink, ExportSource } from './sinks/types.js';

export interface CreateVqbOptions {
  /** A ready Config; otherwise one is read from `env` (default process.env) and `settings`. */
  config?: Config;
  settings?: Overrides;
  env?: Record<string, string | undefined>;
  /**
   * Where vqb's log lines go (a pino logger: `pino()`, or a child of the application's). Without
   * one the library writes nothing to the application's stdout or stderr; LOG_LEVEL is then unused.
   */
  logger?: Logger;
  /** Run workers in this process too (default false: `vqb work` processes do the work). */
  workers?: boolean;
}

/**
 * The options, checked before anything is stored or sent: an unknown key (a typo such as
 * `metadat`) or a wrong type throws OptionsError (code BAD_OPTIONS), naming it.
 */
function checkOptions(options: unknown): z.output<typeof EnqueueOptions> {
  const parsed = EnqueueOptions.safeParse(options ?? {});
  if (parsed.success) return parsed.data;
  const known = Object.keys(EnqueueOptions.shape).join(', ');
  const issues = parsed.error.issues.map((issue) => {
    if (issue.code === 'unrecognized_keys')
      return (
        `unknown option${issue.keys.length > 1 ? 's' : ''} ` +
        `${issue.keys.map((k) => `"${k}"`).join(', ')} (the options: ${known})`
      );
    return `${['options', ...issue.path.map(String)].join('.')}: ${issue.message}`;
  });
  throw new OptionsError(issues.join('; '));
}

/** `{a: undefined}` → `{}`: an option given as undefined is an option not given. */
function withoutUndefined<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}

export class Batch {
  readonly id: string;
  /** Enqueued with a deadline: the judgement then (`feasible`, `not feasible`, `unknown`; docs/plans.md). */
  readonly deadline: DeadlineView | undefined;
  readonly #services: QueueServices;

  constructor(id: string, services: QueueServices, deadline?: DeadlineView) {
    this.id = id;
    this.#services = services;
    this.deadline = deadline;
  }

  /**
   * The batch now, as `GET /v1/batches/:id` and `vqb status <batch> --json` show it: counts,
   * progress, its account, its share of the account's creates, why it waits and an ETA.
   */
  async progress(): Promise<BatchView> {
    const info = await this.#services.batchViews.get(this.id);
    return batchView(info, await batchContext(this.#services, info), clock.now());
  }

  /** One row per input row, in input order, as they stand now (unfinished plates are `pending`). */
  async *results(): AsyncIterable<ExportRow> {
    const source = await batchExportSource(this.#services.batches, this.#services.outcomes, this.id);
    yield* source.rows();
  }

  /**
   * Resolves with the finished batch when every plate has an outcome. Rejects on `signal` or after
   * `timeoutMs`. The finish is heard (the script that finishes a batch publishes it), not asked
   * for: `pollMs` (default 30 s) is only how often the batch is read again meanwhile, in case the
   * message was lost to a reconnect.
   */
  async done(options: { pollMs?: number; timeoutMs?: number; signal?: AbortSignal } = {}): Promise<BatchView> {
    const info = await this.#services.batchViews.finished(this.id, {
      pollMs: options.pollMs ?? 30_000,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    return batchView(info, await batchContext(this.#services, info), clock.now());
  }

  export(formats: readonly ExportFormat[] = EXPORT_FORMATS, dir?: string): Promise<ExportResult> {
    return exportBatch(this.#services, fileSinkFor(this.#services.config, dir), this.id, formats);
  }

  retry(options: { recreate?: boolean } = {}): Promise<RerunResult> {
    return rerunFailed(this.#services, this.id, options);
  }
}

export class Vqb {
  readonly config: Config;
  readonly services: QueueServices;
  readonly #logger: Logger;
  #worker: WorkerHandle | undefined;

  constructor(config: Config, services: QueueServices, logger: Logger) {
    this.config = config;
    this.services = services;
    this.#logger = logger;
  }

  /** Validates, dedups and enqueues; the same plates again resume the same batch unless `force`. */
  async enqueue(plates: readonly PlateInput[], options: EnqueueOptions = {}): Promise<Batch> {
    const checked = checkOptions(options);
    const { source, name, ...request } = withoutUndefined(checked);
    const { batch, deadline } = await enqueue(
      this.services,
      { source: source ?? 'library', plates, ...(name !== undefined ? { name } : {}) },
      request,
    );
    return new Batch(batch.id, this.services, deadline);
  }

  /** A dry run: what enqueueing these plates would cost, without storing or calling anything. */
  async estimate(plates: readonly PlateInput[], options: EnqueueOptions = {}): Promise<CostEstimate> {
    const { source, name, ...request } = withoutUndefined(checkOptions(options));
    return estimate(
      this.services,
      { source: source ?? 'library', plates, ...(name !== undefined ? { name } : {}) },
      request,
    );
  }

  /** A batch enqueued earlier (by any producer). */
  async batch(id: string): Promise<Batch> {
    await this.services.batchViews.get(id); // throws BatchNotFoundError
    return new Batch(id, this.services);
  }

  /** Runs workers in this process (idempotent). */
  startWorkers(): void {
    this.#worker ??= startWorker(this.config, { logger: this.#logger });
  }

  /** Each account's line: running, holding (429, quota, a cap) until when, or paused and why. */
  lines(): Promise<AccountLineState[]> {
    return this.services.accounts.states();
  }

  /** The line of one account (default: the first configured). */
  line(account?: string): Promise<AccountLineState> {
    return this.services.accounts.line(account).state();
  }

  /** Pauses one account, or every account. */
  async pause(account?: string): Promise<void> {
    for (const { line } of this.services.accounts.pick(account)) await line.pauseByOperator();
  }

  /** Resumes one account, or every account (after a key was fixed, too). */
  async resume(account?: string): Promise<void> {
    for (const { id, line } of this.services.accounts.pick(account)) {
      await line.releaseHold();
      await this.services.webhooks.accountResumed(id, await line.resume());
    }
  }

  async close(): Promise<void> {
    await this.#worker?.close();
    await this.services.close();
  }
}

export async function createVqb(options: CreateVqbOptions = {}): Promise<Vqb> {
  const config = options.config ?? loadConfig(options.env ?? process.env, options.settings ?? {});
  const logger = options.logger ?? silentLogger();
  const services = await openQueueServices(config);
  const vqb = new Vqb(config, services, logger);
  if (options.workers) vqb.startWorkers();
  return vqb;
}
