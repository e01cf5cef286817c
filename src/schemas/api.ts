// What the API accepts and answers, declared once in zod. Requests are validated with these
// schemas (validation.ts), handlers return their inferred types, and /openapi.json publishes their
// JSON Schema under the names in openapi.ts, so the document cannot drift from the code. A batch's
// options and view are the library's and the CLI's too (src/schemas/).
import { z } from 'zod';
import {
  AccountId,
  BatchLinks,
  BatchOptions,
  BatchView,
  CallbackUrl,
  DeadlineInput,
  DeadlineJudgement,
  Priority,
  RateInForce,
  Waiting,
} from './batch.js';
import { EXPORT_FORMATS } from './result-row.js';

export {
  AccountId,
  BatchCounts,
  BatchOptions,
  BatchView,
  DeadlineJudgement,
  DeadlineStatus,
  Priority,
  Waiting,
  WebhookDelivery,
  Weight,
} from './batch.js';
export { ResultRow, UpstreamResult } from './result-row.js';

// ---- requests ----------------------------------------------------------------------------------

/** A plate as given, or a row: `plate` plus the caller's own fields, carried to the exports. */
export const PlateItem = z.union(
  [
    z.string().max(256),
    z
      .object({ plate: z.string().max(256) })
      .catchall(z.union([z.string().max(4_096), z.number()]))
      .refine((row) => Object.keys(row).length <= 64, 'a row has at most 64 fields'),
  ],
  { error: 'expected a plate string, or an object with a string "plate" and other fields that are strings or numbers' },
);

export const CreateBatchBody = BatchOptions.extend({
  plates: z
    .array(PlateItem)
    .min(1)
    .describe('plates, or rows with a `plate` field; other fields of a row are carried through to the results'),
  dryRun: z
    .boolean()
    .optional()
    .describe('only report what the batch would cost: nothing is stored and no upstream request is made'),
}).strict();
export type CreateBatchBody = z.output<typeof CreateBatchBody>;

const flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/**
 * The options of a CSV batch: the query string of a text/csv body, or the fields of a
 * multipart/form-data upload (a JSON body carries its own options). Every value arrives as text.
 */
export const CreateBatchQuery = z.object({
  column: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('the plate column, by header name or 1-based index (default: detected)'),
  name: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .describe('batch name, used in the derived batch id (default: the uploaded file name, else `api`)'),
  force: flag.optional().describe('a new batch even if the same content was sent before (pays again)'),
  maxCreates: z.coerce.number().int().min(0).optional().describe('cap on creates for this batch'),
  maxSpend: z.coerce
    .number()
    .min(0)
    .optional()
    .describe(
      "cap on this batch's spend, in the account's currency: turned into creates at its price per " +
        'query (422 NO_PRICE without one)',
    ),
  reuseWithinMs: z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .describe('answer plates from results stored this recently (ms), free'),
  dryRun: flag.optional().describe('only report what the batch would cost'),
  account: AccountId.optional().describe('the account (upstream key) the batch uses'),
  pool: AccountId.optional().describe('a pool of keys: every key of it serves the batch (docs/plans.md)'),
  priority: Priority.optional().describe('interactive, normal or bulk'),
  weight: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000)
    .optional()
    .describe('share relative to the other batches of its class'),
  sheet: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('an .xlsx upload: the sheet to read, by name (default: the first visible sheet)'),
  callbackUrl: CallbackUrl.optional(),
  deadline: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe(DeadlineInput.description ?? ''),
  requireDeadline: flag
    .optional()
    .describe('refuse the batch (422 DEADLINE_NOT_FEASIBLE, nothing stored or paid) when its deadline cannot be met'),
});
export type CreateBatchQuery = z.output<typeof CreateBatchQuery>;

/**
 * A multipart/form-data upload: the CSV as the `file` part, the same options as fields (an unknown
 * field is an error).
 */
export const CreateBatchForm = CreateBatchQuery.extend({
  file: z
    .string()
    .meta({ format: 'binary' })
    .describe(
      'the CSV file (`;`, `,` or tab, UTF-8 or Windows-1252, with or without a header) or an Excel ' +
        '.xlsx workbook (told by its name, media type or content)',
    ),
}).strict();
/** The fields of a form, validated once the file part was read. */
export const CreateBatchFormFields = CreateBatchQuery.strict();

export const ListQuery = z.object({
  offset: z.coerce.number().int().min(0).max(1_000_000_000).default(0),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});
export type ListQuery = z.output<typeof ListQuery>;

export const BatchParams = z.object({ id: z.string().min(1).max(200) });
export type BatchParams = z.output<typeof BatchParams>;

export const ResultsQuery = z.object({
  format: z
    .enum(EXPORT_FORMATS)
    .default('jsonl')
    .describe(
      "jsonl: one JSON object per input row; csv: the file export's columns; xlsx: the same columns " +
        'and rows as typed cells in an Excel workbook',
    ),
});
export type ResultsQuery = z.output<typeof ResultsQuery>;

export const RetryOptions = z
  .object({
    recreate: z.boolean().optional().describe('create failed plates anew, even those with a queryId (a charge each)'),
  })
  .strict();
export const RetryBody = RetryOptions.optional();
export type RetryBody = z.output<typeof RetryBody>;

// ---- responses ---------------------------------------------------------------------------------

/** Every error: the upstream's shape. Branch on `error.code`; the message is for people. */
export const ErrorReply = z.object({
  statusCode: z.number().int().describe('the HTTP status, again'),
  error: z.object({
    code: z.string().describe('stable, e.g. VALIDATION_FAILED, NOT_FOUND, CSV_JSON_ENCODED'),
    message: z.string().describe('what went wrong and what to do'),
  }),
});

const count = z.number().int();

export const Reject = z.object({ row: count, input: z.string(), reason: z.string(), message: z.string() });

export const CreateBatchReply = z.object({
  batch: z.intersection(
    BatchView,
    z.object({ created: z.boolean().describe('false: the same content was sent before and this is that batch') }),
  ),
  rejects: z.array(Reject).describe('the first 100 invalid plates (counts.rejected has them all)'),
  deadline: DeadlineJudgement.optional().describe(
    'with a deadline: the judgement at enqueue (`not feasible`: accepted as asked, a warning)',
  ),
  links: BatchLinks,
});
export type CreateBatchReply = z.output<typeof CreateBatchReply>;

export const CostEstimate = z.object({
  batchId: z.string(),
  rows: count,
  rejected: count,
  duplicates: count,
  plates: count.describe('distinct valid plates'),
  alreadyFinished: count.describe('plates this same batch already finished'),
  reusable: count.describe('plates a stored result within the reuse window would answer'),
  creates: count.describe('creates the batch would send'),
  expectedPolls: count,
  expectedRequests: count,
  secondsAtRate: count.describe("time for the requests at the account's rate in force"),
  ratePerSecond: z
    .number()
    .describe(
      "the account's rate in force (configured, or for `auto` announced or learned so far), requests per second",
    ),
  rateSource: z
    .enum(['configured', 'start', 'announced', 'learned'])
    .describe(
      'where ratePerSecond comes from; `start`: an `auto` account that has heard nothing from the upstream yet ' +
        '(secondsAtRate is at that starting rate; the first answers usually announce the real limit)',
    ),
  firstPollSeconds: z
    .number()
    .describe("the wait before a query's first poll (learned, or VQ_POLL_INITIAL): the first results come no sooner"),
  daysAtCap: count.optional().describe('UTC days the creates need under the daily spending cap'),
  maxCreates: count.optional().describe("the batch's cap on creates (maxCreates, or maxSpend at the price)"),
  cost: z
    .object({
      amount: z
        .number()
        .describe('the creates (up to the cap) at the price per query, plus the expected polls at the price per poll'),
      currency: z.string().describe('ISO 4217, e.g. BRL'),
      perQuery: z.number(),
      perPoll: z.number(),
    })
    .optional()
    .describe("what the batch would cost, when a price is set (VQ_PRICE_PER_QUERY or the account's)"),
  deadline: DeadlineJudgement.optional().describe('with a deadline: whether the batch can meet it (docs/plans.md)'),
});

export const DryRunReply = z.object({
  dryRun: z.literal(true),
  estimate: CostEstimate,
});
export type DryRunReply = z.output<typeof DryRunReply>;

export const ListReply = z.object({
  total: count,
  offset: count,
  limit: count,
  batches: z.array(BatchView).describe('newest first'),
  links: z.object({ next: z.string().optional(), prev: z.string().optional() }),
});
export type ListReply = z.output<typeof ListReply>;

export const RetryReply = z.object({
  batchId: z.string(),
  retried: count,
  recreated: count.describe('of those, plates created (and paid for) again'),
  skipped: count.describe('failed plates whose job is still running'),
  links: z.object({ self: z.string() }),
});
export type RetryReply = z.output<typeof RetryReply>;

export const DeleteQuery = z.object({
  cancel: z
    .enum(['true', 'false', '1', '0'])
    .transform((v) => v === 'true' || v === '1')
    .default(false)
    .describe(
      'stop a running batch first: plates not yet sent are dropped (CANCELLED, no charge); created ones run to the end',
    ),
});
export type DeleteQuery = z.output<typeof DeleteQuery>;

export const ArchiveFile = z.object({
  name: z.string(),
  kind: z.enum(['jsonl', 'csv', 'rejects']),
  bytes: count,
  sha256: z.string(),
  rows: count.describe('data rows (a CSV header not counted)'),
  schema: z.string().describe('what a row is, with a version: ResultRow/1, csv-export/1, rejects-csv/1'),
});

export const DeleteReply = z.object({
  batchId: z.string(),
  state: z
    .enum(['archived', 'cancelling'])
    .describe(
      'archived: written, read back and deleted from Redis; cancelling: created plates still run, ' +
        'the batch is archived when they finish',
    ),
  alreadyArchived: z.boolean().optional(),
  archivedAt: z.iso.datetime().optional(),
  files: z
    .array(ArchiveFile)
    .optional()
    .describe('the archive: same files as `vqb export`, checked by sha256 and row count'),
  dropped: count.optional().describe('cancelling: plates dropped before they were sent (no charge)'),
  running: count.optional().describe('cancelling: created plates still running (paid; their results are kept)'),
  links: z.object({ self: z.string(), results: z.string() }),
});
export type DeleteReply = z.output<typeof DeleteReply>;

/** An account's line: running, paused (why), waiting (for what, until when). */
export const AccountLineView = z.object({
  account: z.string(),
  rateLimit: z.string().describe('the configured request limit, e.g. `300/min` or `auto`'),
  rate: RateInForce.optional().describe('the rate in force now, and where it comes from'),
  paused: z.boolean(),
  reason: z.string().optional().describe('why nothing moves, in words (waiting.message)'),
  waiting: Waiting.optional(),
  limitedUntil: z.iso.datetime().optional().describe('a 429 or quota wait ends then'),
  upstream: z
    .object({
      state: z.enum(['ok', 'unreachable']),
      since: z.iso.datetime().optional().describe('unreachable: the first failed request of the outage'),
      attempts: z.number().int().optional().describe('unreachable: failed requests since then, by every worker'),
      reason: z.string().optional().describe('the last failure, in words ("connection refused", "HTTP 502")'),
      backAt: z.iso.datetime().optional().describe('ok: when the last outage ended (shown for 15 minutes after it)'),
      downMs: z.number().int().optional().describe('ok: how long the last outage lasted'),
    })
    .describe("whether the account's upstream answers (no answer or a 5xx to 3 requests in a row: unreachable)"),
});
export type AccountLineView = z.output<typeof AccountLineView>;

export const PoolView = z
  .object({
    pool: z.string(),
    perSecond: z.number().describe("the pool's rate: the sum of its serving keys' rates, requests a second"),
    keys: z.array(
      z.object({
        account: z.string(),
        perSecond: z.number().describe("the key's rate in force (learned or configured), requests a second"),
        share: z.number().describe("the key's share of the pool's rate now (0 while it holds)"),
        state: z
          .string()
          .describe(
            '`serving`, or why the key holds (a pause code such as EXPIRED_API_KEY, `quota`, `rate_limit`, `budget`)',
          ),
      }),
    ),
    sharedQuota: z
      .array(z.array(z.string()))
      .describe('groups of keys whose limits look like one quota (their 429s and announced remainders move together)'),
  })
  .describe('a pool of keys (docs/plans.md)');
export type PoolView = z.output<typeof PoolView>;

export const HealthReply = z.object({
  status: z.enum(['ok', 'degraded']),
  redis: z.enum(['ok', 'down']),
  accounts: z.array(AccountLineView).optional().describe("each account's line; left out when Redis is down"),
  pools: z
    .array(PoolView)
    .optional()
    .describe("each pool of keys whose keys the token may all see: its rate, each key's share and state"),
});
export type HealthReply = z.output<typeof HealthReply>;
