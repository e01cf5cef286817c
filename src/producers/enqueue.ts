// The one way a batch enters the queue. Every front door (the CLI, the HTTP API, the console, the
// drop folder, the library) parses its own input into rows and calls this: the account is resolved
// once, the callback URL checked once, the batch id derived once (from the content, so the same
// input resumes its batch instead of paying again), and then either a dry run (`estimate`) or the
// ingest (`enqueue`), which records which door the batch came through. Only this module imports
// the ingest itself (test/unit/imports.test.ts holds it to that).

import { type PoolChoice, poolFor } from '../accounts/account.js';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import { InputError } from '../errors.js';
import { createsCap } from '../money.js';
import { type DeadlineView, deadlineLine, parseDeadline } from '../plans/deadline.js';
import { BATCH_ID_RULE, isBatchId } from '../queue/batch/store.js';
import type { PriorityClass } from '../queue/types.js';
import type { BatchSource } from '../schemas/batch.js';
import type { QueueServices } from '../services.js';
import { SPAN, spanned } from '../telemetry/index.js';
import { checkCallbackUrl } from '../webhooks/target.js';
import { batchIdFor } from './batch-id.js';
import { type CostEstimate, estimateCost } from './dry-run.js';
import { type IngestResult, ingest, tooManyForInteractive } from './ingest.js';
import { listDigest, type PlateInput, toInputRows } from './list.js';
import type { InputRow } from './types.js';

export { batchIdFor } from './batch-id.js';
export type { IngestResult } from './ingest.js';

/** A batch's options, whichever door they came through (each door parses them its own way). */
export interface BatchRequest {
  /** Use this id instead of one derived from the content (letters, digits, _ and -). */
  batchId?: string;
  /** A new batch even if the same content was sent before (pays again). */
  force?: boolean;
  metadata?: Record<string, unknown>;
  maxCreates?: number;
  /** A cap in money (the account's currency): turned into creates at its price (NO_PRICE without one). */
  maxSpend?: number;
  reuseWithinMs?: number;
  /** The account (its key and limits); default: the first configured. */
  account?: string;
  /**
   * A pool of keys (`"pool"` in the accounts file): every key of it serves the batch, each at its
   * own rate (docs/plans.md). With `account`, that key of the pool is the batch's home.
   */
  pool?: string;
  priority?: PriorityClass;
  weight?: number;
  callbackUrl?: string;
  /**
   * When the batch should be finished: epoch ms, or as written (`2h`, `18:00`, an ISO instant;
   * plans/deadline.ts). Judged before anything is stored (docs/plans.md).
   */
  deadline?: string | number;
  /** Refuse the batch (DEADLINE_NOT_FEASIBLE, nothing stored or paid) when its deadline cannot be met. */
  requireDeadline?: boolean;
}

/** What an enqueue did, and with a deadline, the judgement it was given. */
export type EnqueueResult = IngestResult & { deadline?: DeadlineView };

/**
 * What a door read: a file's rows (with the file's sha256) or a list of plates. `name` is the
 * file's or the one the caller gave; without one (a text/csv body, a list with no `name`) the
 * content alone names the batch (contentBatchId).
 */
export type EnqueueInput =
  | {
      source: BatchSource;
      name?: string;
      digest: string;
      rows: Iterable<InputRow> | AsyncIterable<InputRow>;
      extraColumns?: readonly string[];
    }
  | { source: BatchSource; name?: string; plates: readonly PlateInput[] };

interface Prepared {
  id: string;
  digest: string;
  name: string;
  rows: Iterable<InputRow> | AsyncIterable<InputRow>;
  extraColumns: readonly string[];
  account: string;
  /** The pool's name and its keys besides `account` (a pooled batch). */
  pool?: { name: string; keys: string[] };
  callbackUrl?: string;
  /** maxCreates and maxSpend as one cap in creates. */
  maxCreates?: number;
  /** The deadline, epoch ms. */
  deadline?: number;
}

/**
 * The id of the batch an input makes for `account`: `<name>-<digest>` for a named input (a file,
 * a list given a name), as the CLI and the drop folder name theirs; for an unnamed one (a text/csv
 * body, a list with no `name`) the account's batch of the same content if there is one, whichever
 * door made it, so the file a user ran with `vqb run` and then sent to POST /v1/batches resumes its
 * batch instead of paying again (issue 36); `force`: a new batch.
 */
async function contentBatchId(
  services: Pick<QueueServices, 'batches'>,
  account: string,
  input: { name: string; named: boolean; digest: string },
  force: boolean,
): Promise<string> {
  if (force || input.named) return batchIdFor(input.name, input.digest, force);
  return (await services.batches.byContent(account, input.digest)) ?? batchIdFor(input.name, input.digest);
}

/** What a request names, checked before its input is read (see checkRequest). */
export interface CheckedRequest {
  /** The pool, its home key and its other keys (a pooled batch). */
  pool?: PoolChoice;
  /** The account the batch lives with: the pool's home, else the one asked for (undefined: the first). */
  account?: string;
  /** The callback URL in its checked form (its name is resolved later, by enqueue and estimate). */
  callbackUrl?: string;
}

/**
 * The rules a request's own words must meet, decided here only and raised in the same errors
 * whichever door they came through: a batch id's form (BAD_BATCH_ID), a pool and its home key
 * (POOL_NOT_FOUND, …), a callback URL's form and host (the allow-list). A door that must refuse
 * before it reads a large input (`vqb run` before the file) calls this first; `prepare` calls it
 * again, for every door.
 */
export function checkRequest(
  config: Config,
  options: Pick<BatchRequest, 'batchId' | 'pool' | 'account' | 'callbackUrl'>,
): CheckedRequest {
  if (options.batchId !== undefined && !isBatchId(options.batchId))
    throw new InputError('BAD_BATCH_ID', `batch id ${JSON.stringify(options.batchId)}: ${BATCH_ID_RULE}`);
  const pool = options.pool !== undefined ? poolFor(config, options.pool, options.account) : undefined;
  const account = pool?.home ?? options.account;
  const callbackUrl =
    options.callbackUrl !== undefined ? checkCallbackUrl(options.callbackUrl, config.webhooks) : undefined;
  return {
    ...(pool !== undefined ? { pool } : {}),
    ...(account !== undefined ? { account } : {}),
    ...(callbackUrl !== undefined ? { callbackUrl } : {}),
  };
}

/** The id, the account and the callback URL of the batch `input` would make, each decided here only. */
async function prepare(
  services: Pick<QueueServices, 'config' | 'accounts' | 'batches' | 'webhooks'>,
  input: EnqueueInput,
  options: BatchRequest,
): Promise<Prepared> {
  const { pool, account: asked } = checkRequest(services.config, options);
  // Read once, here, whichever door it came through: a deadline that cannot be read stops everything.
  const deadline = parseDeadline({ deadline: options.deadline }, clock.now(), services.config.timeZone);
  const { account: resolved } = services.accounts.for(asked);
  const account = resolved.id;
  const maxCreates = createsCap(options, resolved.price, account);
  // Checked once, here, before anything is stored or read: its form, the allow-list, and the
  // addresses its name resolves to (a name of an internal address is refused). The ingest trusts it.
  const callbackUrl =
    options.callbackUrl !== undefined ? await services.webhooks.checkTarget(options.callbackUrl) : undefined;
  let rows: Iterable<InputRow> | AsyncIterable<InputRow>;
  let digest: string;
  let extraColumns: readonly string[];
  let name: string;
  if ('plates' in input) {
    const list = toInputRows(input.plates);
    rows = list.rows;
    // A named batchId given other plates than its batch holds is refused (BATCH_ID_TAKEN).
    digest = listDigest(list.rows);
    extraColumns = list.extraColumns;
    name = input.name ?? input.source;
  } else {
    ({ rows, digest } = input);
    name = input.name ?? input.source;
    extraColumns = input.extraColumns ?? [];
  }
  const named = input.name !== undefined;
  const id =
    options.batchId ?? (await contentBatchId(services, account, { name, named, digest }, options.force === true));
  return {
    id,
    digest,
    name,
    rows,
    extraColumns,
    account,
    ...(pool !== undefined ? { pool: { name: pool.name, keys: pool.keys } } : {}),
    ...(callbackUrl !== undefined ? { callbackUrl } : {}),
    ...(maxCreates !== undefined ? { maxCreates } : {}),
    ...(deadline !== undefined ? { deadline } : {}),
  };
}

/** A dry run: what the batch would cost; nothing stored, nothing sent upstream. */
export async function estimate(
  services: QueueServices,
  input: EnqueueInput,
  options: BatchRequest = {},
): Promise<CostEstimate> {
  const p = await prepare(services, input, options);
  const cost = await estimateCost(services, p.id, p.rows, {
    account: p.account,
    ...(p.pool !== undefined ? { poolKeys: p.pool.keys } : {}),
    ...(p.maxCreates !== undefined ? { maxCreates: p.maxCreates } : {}),
    ...(options.reuseWithinMs !== undefined ? { reuseWithinMs: options.reuseWithinMs } : {}),
    ...(p.deadline !== undefined ? { deadline: p.deadline } : {}),
  });
  // The dry run refuses what the run would refuse, in the same words.
  const max = services.config.interactiveMax;
  if (options.priority === 'interactive' && cost.plates > max) throw tooManyForInteractive(max, cost.plates);
  return cost;
}

/** Stores the batch's rows and enqueues each new plate once; the same content again resumes its batch. */
export async function enqueue(
  services: QueueServices,
  input: EnqueueInput,
  options: BatchRequest = {},
  hooks: { onLockWait?: (expiresInMs: number) => void } = {},
): Promise<EnqueueResult> {
  const p = await prepare(services, input, options);
  let judged: DeadlineView | undefined;
  if (p.deadline !== undefined) {
    // Judged on the plates the batch would create, before anything is stored: the rows are read
    // once into memory for it and then ingested from there (a deadline batch is read twice).
    const rows: InputRow[] = [];
    for await (const row of p.rows) rows.push(row);
    p.rows = rows;
    let refuse: string | undefined;
    const estimated = await estimateCost(services, p.id, rows, {
      account: p.account,
      ...(p.pool !== undefined ? { poolKeys: p.pool.keys } : {}),
      deadline: p.deadline,
      ...(p.maxCreates !== undefined ? { maxCreates: p.maxCreates } : {}),
      ...(options.reuseWithinMs !== undefined ? { reuseWithinMs: options.reuseWithinMs } : {}),
      onVerdict: (verdict) => {
        if (verdict.feasibility === 'not feasible' && options.requireDeadline === true)
          refuse = deadlineLine(verdict, clock.now(), services.config.timeZone);
      },
    });
    if (refuse !== undefined)
      throw new InputError('DEADLINE_NOT_FEASIBLE', `${refuse}; refused as asked: nothing was stored or sent`);
    judged = estimated.deadline;
  }
  // Tracing: the batch is a span of its own (under the door's: an API request's, say), and each
  // of its plates a trace of its own linked to it (ingest.ts).
  const traced = { 'vqb.batch.id': p.id, 'vqb.account.id': p.account, 'vqb.door': input.source };
  const result = await spanned(SPAN.batch, traced, () =>
    ingestLine(() =>
      ingest(
        services,
        {
          id: p.id,
          digest: p.digest,
          source: input.source,
          name: p.name,
          extraColumns: p.extraColumns,
          account: p.account,
          ...(p.pool !== undefined ? { pool: p.pool } : {}),
          ...(options.metadata ? { metadata: options.metadata } : {}),
          ...(p.maxCreates !== undefined ? { maxCreates: p.maxCreates } : {}),
          ...(options.reuseWithinMs !== undefined ? { reuseWithinMs: options.reuseWithinMs } : {}),
          ...(options.priority !== undefined ? { priority: options.priority } : {}),
          ...(options.weight !== undefined ? { weight: options.weight } : {}),
          ...(p.deadline !== undefined ? { deadline: p.deadline } : {}),
          ...(p.callbackUrl !== undefined ? { callbackUrl: p.callbackUrl } : {}),
          ...(hooks.onLockWait ? { onLockWait: hooks.onLockWait } : {}),
        },
        p.rows,
      ),
    ),
  );
  return judged ? { ...result, deadline: judged } : result;
}

/** A list of plates (the library's and the JSON API's shape): `enqueue` with `{ source, plates }`. */
export function ingestList(
  services: QueueServices,
  plates: readonly PlateInput[],
  options: BatchRequest & { source: BatchSource; name?: string },
): Promise<EnqueueResult> {
  const { source, name, ...request } = options;
  return enqueue(services, { source, plates, ...(name !== undefined ? { name } : {}) }, request);
}

/**
 * Runs this process's ingests one at a time. Two identical requests at once (a client retrying on a
 * timeout, the same file confirmed in the console) are already kept from storing the rows twice by
 * ingest's own Redis lock (BatchStore.lockIngest); this line only keeps one process from ingesting
 * several files at once. The upstream pace, not ingest, bounds throughput, so it costs nothing that matters.
 */
function serialized(): <T>(fn: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (fn) => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => {});
    return run;
  };
}

const ingestLine = serialized();
