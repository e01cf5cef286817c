// What the API accepts and answers, declared once in zod. Requests are validated with these
// schemas (validation.ts), handlers return their inferred types, and /openapi.json publishes their
// JSON Schema, so the document cannot drift from the code.
import { z } from 'zod';

// ---- requests ----------------------------------------------------------------------------------

const scalar = z.union([z.string().max(4_096), z.number(), z.boolean(), z.null()]);

export const AccountId = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, 'an account id: lower-case letters, digits, _ and -');
export const Priority = z.enum(['interactive', 'normal', 'bulk']);
export const Weight = z.number().int().min(1).max(1_000);

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

export const CreateBatchBody = z
  .object({
    plates: z.array(PlateItem).min(1).describe('plates, or rows with a `plate` field; other fields of a row are carried through to the results'),
    metadata: z
      .record(z.string().max(100), scalar)
      .refine((m) => Object.keys(m).length <= 50, 'at most 50 metadata fields')
      .optional()
      .describe('flat key/value pairs kept with the batch (values: string, number, boolean or null)'),
    batchId: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,100}$/, '1–100 letters, digits, _ or -')
      .optional()
      .describe('use this id instead of one derived from the content'),
    force: z.boolean().optional().describe('a new batch even if the same plates were sent before (pays again)'),
    name: z.string().min(1).max(100).optional().describe('shown in status and used in the derived batch id'),
    maxCreates: z.number().int().min(0).optional().describe('this batch never creates more than this many queries; it waits at the cap (never fails)'),
    reuseWithinMs: z.number().int().min(0).optional().describe('answer plates from results stored this recently (ms) by any batch, free'),
    dryRun: z.boolean().optional().describe('only report what the batch would cost: nothing is stored and no upstream request is made'),
    account: AccountId.optional().describe('the account (upstream key) the batch uses; default: the first configured (`default`)'),
    priority: Priority.optional().describe('interactive: a person waits (served before anything else of the account, at most VQ_INTERACTIVE_MAX plates); normal; bulk'),
    weight: Weight.optional().describe("share of the account's rate relative to the other batches of its class (default 1)"),
  })
  .strict();
export type CreateBatchBody = z.output<typeof CreateBatchBody>;

const flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** Query of POST /v1/batches; used by text/csv bodies (a JSON body carries its own options). */
export const CreateBatchQuery = z.object({
  column: z.string().min(1).max(200).optional().describe('text/csv: the plate column, by header name or 1-based index (default: detected)'),
  name: z.string().min(1).max(100).optional().describe('text/csv: batch name, e.g. the file name'),
  force: flag.optional().describe('text/csv: a new batch even if the same content was sent before'),
  maxCreates: z.coerce.number().int().min(0).optional().describe('text/csv: cap on creates for this batch'),
  reuseWithinMs: z.coerce.number().int().min(0).optional().describe('text/csv: reuse window in ms'),
  dryRun: flag.optional().describe('text/csv: only report what the batch would cost'),
  account: AccountId.optional().describe('text/csv: the account (upstream key) the batch uses'),
  priority: Priority.optional().describe('text/csv: interactive, normal or bulk'),
  weight: z.coerce.number().int().min(1).max(1_000).optional().describe('text/csv: share relative to the other batches of its class'),
});
export type CreateBatchQuery = z.output<typeof CreateBatchQuery>;

export const ListQuery = z.object({
  offset: z.coerce.number().int().min(0).max(1_000_000_000).default(0),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});
export type ListQuery = z.output<typeof ListQuery>;

export const BatchParams = z.object({ id: z.string().min(1).max(200) });
export type BatchParams = z.output<typeof BatchParams>;

export const ResultsQuery = z.object({
  format: z.enum(['jsonl', 'csv']).default('jsonl').describe("jsonl: one JSON object per input row; csv: the file export's columns"),
});
export type ResultsQuery = z.output<typeof ResultsQuery>;

export const RetryBody = z
  .object({ recreate: z.boolean().optional().describe('create failed plates anew, even those with a queryId (a charge each)') })
  .strict()
  .optional();
export type RetryBody = z.output<typeof RetryBody>;

// ---- responses ---------------------------------------------------------------------------------

export const ErrorReply = z.object({
  statusCode: z.number().int(),
  error: z.object({ code: z.string(), message: z.string() }),
});

const count = z.number().int();

export const BatchCounts = z
  .object({
    total: count.describe('input rows'),
    enqueued: count.describe('distinct valid plates put on the queue'),
    queued: count,
    inflight: count,
    done: count,
    failed: count,
    rejected: count.describe('invalid plates, never sent upstream'),
    duplicates: count.describe('rows repeating an earlier plate of the batch'),
    possibleDuplicates: count.describe('plates the upstream may have charged twice'),
    creates: count,
    polls: count,
    rateLimited: count,
    reused: count.describe('plates answered from a stored result, free'),
  })
  .catchall(count.describe('counters added later'));

export const Waiting = z.object({
  reason: z.enum(['paused', 'budget', 'rate_limit', 'quota']),
  code: z.string().optional().describe('why the account was paused (e.g. EXPIRED_API_KEY, PAUSED_BY_OPERATOR)'),
  message: z.string(),
  until: z.iso.datetime().optional(),
});
export type Waiting = z.output<typeof Waiting>;

export const BatchView = z.object({
  id: z.string(),
  name: z.string(),
  account: z.string().describe('the account (upstream key) the batch uses'),
  priority: Priority,
  weight: z.number(),
  share: z.number().describe("share of the account's creates the batch gets now, 0–1 (0: none waiting, or a higher class goes first)"),
  source: z.enum(['file', 'api', 'library', 'inbox']),
  product: z.string(),
  createdAt: z.iso.datetime(),
  finishedAt: z.iso.datetime().optional(),
  sealed: z.boolean().describe('every input row is stored'),
  finished: z.boolean().describe('every plate has an outcome'),
  metadata: z.record(z.string(), z.unknown()),
  extraColumns: z.array(z.string()),
  counts: BatchCounts,
  progress: z.object({
    percent: z.number().describe('finished plates (done + failed) per enqueued plate, 0–100'),
    finished: count,
    of: count,
  }),
  waiting: Waiting.optional().describe('why nothing moves, while the batch is unfinished'),
  eta: z
    .object({ seconds: z.number(), at: z.iso.datetime() })
    .optional()
    .describe("rough estimate from the remaining plates, requests per plate so far and the batch's share of its account's rate"),
  links: z.object({ self: z.string(), results: z.string() }),
});
export type BatchView = z.output<typeof BatchView>;

export const Reject = z.object({ row: count, input: z.string(), reason: z.string(), message: z.string() });

export const CreateBatchReply = z.object({
  batch: BatchView.extend({ created: z.boolean().describe('false: the same content was sent before and this is that batch') }),
  rejects: z.array(Reject).describe('the first 100 invalid plates (counts.rejected has them all)'),
  links: z.object({ self: z.string(), results: z.string() }),
});
export type CreateBatchReply = z.output<typeof CreateBatchReply>;

export const DryRunReply = z.object({
  dryRun: z.literal(true),
  estimate: z.object({
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
    secondsAtRate: count.describe('time for the requests at the configured rate limit'),
    daysAtCap: count.optional().describe('UTC days the creates need under the daily spending cap'),
  }),
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

export const HealthReply = z.object({
  status: z.enum(['ok', 'degraded']),
  redis: z.enum(['ok', 'down']),
  accounts: z
    .array(
      z.object({
        account: z.string(),
        rateLimit: z.string(),
        paused: z.boolean(),
        reason: z.string().optional(),
        waiting: Waiting.optional(),
        limitedUntil: z.iso.datetime().optional(),
      }),
    )
    .optional()
    .describe("each account's line; left out when Redis is down"),
});
export type HealthReply = z.output<typeof HealthReply>;
