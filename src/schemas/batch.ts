// A batch, described once in zod for every front door: the options a new batch takes (the HTTP
// API's JSON body and form fields, the library's `enqueue`) and how a batch looks
// (`GET /v1/batches/:id`, `batch.progress()`, `vqb status <batch> --json`: the same object, times
// in ISO 8601). The HTTP API validates with these, /openapi.json publishes them (named in
// src/http/openapi.ts), and the library's types are inferred from them.
import { z } from 'zod';
import { WAIT_REASONS } from '../accounts/wait.js';

/**
 * Why an attempt failed, as a category and never the socket's own words: a tenant reading the
 * status must not learn what answers on a port (issue #35: `ECONNREFUSED 10.0.0.1:6379` is a port
 * scanner's signal). The words stay in the worker's debug log, which only the operator reads.
 */
export const DELIVERY_FAILURES = {
  refused_address: 'the target is, or resolves to, an address webhooks may not reach: not sent',
  host_not_allowed: 'the host is not on VQ_WEBHOOK_ALLOW: not sent',
  dns_failed: 'the host name did not resolve',
  connect_failed: 'no connection could be made to the receiver',
  timeout: 'no answer within VQ_WEBHOOK_TIMEOUT',
  tls: 'the TLS handshake failed (certificate or protocol)',
  http_4xx: 'the receiver answered 4xx (see lastStatus)',
  http_5xx: 'the receiver answered 5xx (see lastStatus)',
  http_other: 'the receiver answered neither 2xx, 4xx nor 5xx (see lastStatus); redirects are not followed',
  gone: 'the receiver answered 410 Gone: not sent again',
  failed: 'the attempt failed',
} as const;
export type DeliveryFailure = keyof typeof DELIVERY_FAILURES;

export const AccountId = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, 'an account id: lower-case letters, digits, _ and -');
export const Priority = z.enum(['interactive', 'normal', 'bulk']).describe('interactive: a person waits; normal; bulk');
export const Weight = z.number().int().min(1).max(1_000);
export const BatchSource = z.enum(['file', 'api', 'console', 'library', 'inbox', 'watch']);
export type BatchSource = z.output<typeof BatchSource>;

/**
 * Checked again against the server's settings (http/https only, VQ_WEBHOOK_ALLOW, a secret) before
 * anything is stored.
 */
export const CallbackUrl = z
  .string()
  .min(1)
  .max(2_048)
  .describe(
    "http(s) URL that gets this batch's signed webhooks (Standard Webhooks): `batch.finished`, " +
      '`account.paused` while it waits on a paused account, and with a deadline `batch.at_risk` / ' +
      '`batch.back_on_track`. Its host must be on VQ_WEBHOOK_ALLOW when that is set (else 422 ' +
      'CALLBACK_HOST_NOT_ALLOWED); a URL that is not http(s) is 422 CALLBACK_URL_INVALID',
  );

/** A deadline as a client writes it (plans/deadline.ts): read once by the enqueue, BAD_DEADLINE when it cannot be. */
export const DeadlineInput = z
  .union([z.string().min(1).max(64), z.number().int().positive()])
  .describe(
    'when the batch should be finished (docs/plans.md): a span from now (`90m`, `2h`, `1h30m`), a ' +
      'time of day (`18:00`, server time, today or else tomorrow), an ISO instant, or epoch ms; 400 ' +
      'BAD_DEADLINE when it cannot be read or has passed',
  );

const iso = z.iso.datetime();

/** A deadline judged against the account's rate, answer time and the work ahead (docs/plans.md). */
export const DeadlineJudgement = z.object({
  feasibility: z
    .enum(['feasible', 'not feasible', 'unknown'])
    .describe('feasible: even the slow end of the ETA range is in time; unknown: no rate known yet'),
  deadline: iso,
  eta: z
    .object({ from: iso, to: iso, expected: iso })
    .optional()
    .describe('the finish at the fast and the slow end of what is known, and as expected'),
  slackSeconds: z.number().int().optional().describe('the deadline less the expected finish (negative: late by)'),
  aheadPlates: z.number().int().describe('plates ahead of the batch on its key: interactive ones, batches due earlier'),
  cost: z
    .object({
      low: z.object({ amount: z.number(), currency: z.string() }),
      high: z.object({ amount: z.number(), currency: z.string() }),
    })
    .optional()
    .describe('the cost range, when the account has a price'),
  knownBy: z.string().optional().describe('while unknown: what would make the rate known'),
  held: z
    .array(z.object({ account: z.string(), why: z.string() }))
    .optional()
    .describe(
      "while unknown because no key of the batch's pool serves: each key and why it holds " +
        "(a pause's code, quota, rate_limit, budget)",
    ),
  line: z.string().describe('the `deadline: …` line a person reads'),
});

/** A batch's deadline as it runs: the judgement now, and whether it is at risk. */
export const DeadlineStatus = DeadlineJudgement.extend({
  atRisk: z.boolean().describe('the projected finish passes the deadline (finished: it finished after it)'),
  atRiskSince: iso.optional().describe('since when it is at risk (the deadline watch, webhook `batch.at_risk`)'),
});

const scalar = z.union([z.string().max(4_096), z.number(), z.boolean(), z.null()]);

/**
 * How a new batch is stored and scheduled, whichever door it comes through. Strict: an unknown
 * option (a typo such as `metadat`) is an error, never silently dropped before a paid create.
 */
export const BatchOptions = z
  .object({
    account: AccountId.optional().describe(
      'the account (upstream key) the batch uses; default: the first configured (`default`)',
    ),
    pool: AccountId.optional().describe(
      'a pool of keys (accounts declared `"pool": "NAME"`): every key of it serves the batch, each ' +
        "at its own rate; with `account`, that key is the batch's home. Unknown (or not all of its " +
        'keys visible to the token): 404 POOL_NOT_FOUND',
    ),
    priority: Priority.optional().describe(
      'interactive: a person waits (served before anything else of the account, at most ' +
        'VQ_INTERACTIVE_MAX plates); normal (default); bulk',
    ),
    weight: Weight.optional().describe(
      "share of the account's rate relative to the other batches of its class (default 1)",
    ),
    metadata: z
      .record(z.string().max(100), scalar)
      .refine((m) => Object.keys(m).length <= 50, 'at most 50 metadata fields')
      .optional()
      .describe('flat key/value pairs kept with the batch (values: string, number, boolean or null)'),
    // Its form is enqueue's rule alone (checkRequest), so every door refuses it in the same error.
    batchId: z
      .string()
      .optional()
      .describe(
        'use this id instead of one derived from the content: 1–100 letters, digits, _ or - (else 400 BAD_BATCH_ID)',
      ),
    name: z.string().min(1).max(100).optional().describe('shown in status and used in the derived batch id'),
    force: z.boolean().optional().describe('a new batch even if the same plates were sent before (pays again)'),
    maxCreates: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe('this batch never creates more than this many queries; it waits at the cap (never fails)'),
    maxSpend: z
      .number()
      .min(0)
      .optional()
      .describe(
        "cap on this batch's spend in the account's currency, turned into creates at its price per " +
          'query (422 NO_PRICE without a price); with maxCreates the smaller holds',
      ),
    reuseWithinMs: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        'answer plates from results stored this recently (ms) by any batch of the account (or of ' +
          'the accounts that share results), free',
      ),
    callbackUrl: CallbackUrl.optional(),
    deadline: DeadlineInput.optional(),
    requireDeadline: z
      .boolean()
      .optional()
      .describe(
        'refuse the batch (422 DEADLINE_NOT_FEASIBLE, nothing stored or paid) when its deadline ' +
          'cannot be met; else it is accepted and `deadline.feasibility` says `not feasible`',
      ),
  })
  .strict();
export type BatchOptions = z.input<typeof BatchOptions>;

/** The library's `enqueue` and `estimate` options: a batch's options, and which door it came through. */
export const EnqueueOptions = BatchOptions.extend({
  source: BatchSource.optional().describe('which door the batch came through (default `library`)'),
}).strict();
export type EnqueueOptions = z.input<typeof EnqueueOptions>;

const count = z.number().int();

export const BatchCounts = z
  .object({
    total: count.describe('input rows'),
    enqueued: count.describe('distinct valid plates put on the queue'),
    queued: count.describe('enqueued plates not created yet'),
    inflight: count.describe('created upstream, not finished'),
    done: count,
    failed: count,
    rejected: count.describe('invalid plates, never sent upstream'),
    duplicates: count.describe('rows repeating an earlier plate of the batch'),
    possibleDuplicates: count.describe('plates the upstream may have charged twice'),
    creates: count.describe('queries created upstream (answered with a query id)'),
    createsSent: count.describe(
      'creates that left for the upstream and may be billed, whatever came back (an answer cut off or lost included)',
    ),
    polls: count.describe('polls answered'),
    pollsSent: count.describe('polls that left for the upstream, whatever came back'),
    rateLimited: count.describe('requests the upstream answered 429'),
    reused: count.describe('plates answered from a stored result, free'),
    cancelled: count
      .optional()
      .describe('of `failed`, plates a cancel dropped (delete --cancel): never sent upstream, never charged'),
  })
  .catchall(count.describe('counters added later'));
export type BatchCounts = z.output<typeof BatchCounts>;

export const Waiting = z.object({
  reason: z.enum(WAIT_REASONS),
  code: z
    .string()
    .optional()
    .describe('why the account was paused (e.g. EXPIRED_API_KEY, UNRECOGNISED_ANSWER, PAUSED_BY_OPERATOR)'),
  message: z.string().describe('what happens and what to do, in words'),
  until: z.iso.datetime().optional().describe('when the wait ends, when known'),
  since: z.iso.datetime().optional().describe('upstream_unreachable: the first failed request of the outage'),
});
export type Waiting = z.output<typeof Waiting>;

export const WaitingForKey = z.object({
  account: z.string().describe('the account whose key created (and paid for) the plates'),
  plates: z.number().int().describe("the batch's plates created with that key and not read yet"),
  code: z.string().describe('why the key stopped (e.g. EXPIRED_API_KEY, UPSTREAM_UNREACHABLE)'),
  message: z.string().describe('what the upstream said, in words'),
  resume: z.string().describe('what brings them back'),
});

export const BatchLinks = z.object({
  self: z.string().describe('this batch in the HTTP API (`vqb serve`)'),
  results: z.string().describe('its results in the HTTP API'),
});

export const WebhookDelivery = z.object({
  id: z.string().describe('the webhook-id, the same on every attempt'),
  event: z.enum([
    'batch.finished',
    'account.paused',
    'account.resumed',
    'batch.at_risk',
    'batch.back_on_track',
    'plate.changed',
    'watch.round_finished',
  ]),
  url: z.string(),
  state: z.enum(['pending', 'retrying', 'delivered', 'failed']),
  attempts: count,
  lastStatus: count.optional().describe("the receiver's HTTP status at the last attempt"),
  lastError: z
    .enum(Object.keys(DELIVERY_FAILURES) as [DeliveryFailure, ...DeliveryFailure[]])
    .optional()
    .describe(
      'why the last attempt failed, as a category: refused_address, host_not_allowed, dns_failed, ' +
        'connect_failed, timeout, tls, http_4xx, http_5xx, http_other, gone, failed',
    ),
  lastAttemptAt: z.iso.datetime().optional(),
  deliveredAt: z.iso.datetime().optional(),
  createdAt: z.iso.datetime(),
});
export type WebhookDelivery = z.output<typeof WebhookDelivery>;

/** An account's rate in force: what it is paced at now and where that comes from. */
export const RateInForce = z.object({
  perSecond: z.number().describe('requests per second the account is paced at now'),
  source: z
    .enum(['configured', 'start', 'announced', 'learned'])
    .describe(
      'configured (a number was set); for `auto`: start, announced (the upstream said it), learned (from 429s)',
    ),
  text: z.string().describe('the rate and how sure it is, in words'),
  limit: z.number().optional().describe("the upstream's announced limit per window"),
  windowMs: z.number().optional(),
  ceilingPerSecond: z.number().optional(),
  last429At: z.iso.datetime().optional(),
  lastProbeAt: z.iso.datetime().optional(),
});
export type RateInForce = z.output<typeof RateInForce>;

export const BatchView = z.object({
  id: z.string(),
  name: z.string(),
  account: z.string().describe('the account (upstream key) the batch uses'),
  priority: Priority,
  weight: z.number().int(),
  share: z
    .number()
    .describe("share of the account's creates the batch gets now, 0–1 (0: none waiting, or a higher class goes first)"),
  rate: RateInForce.optional().describe(
    "the account's rate in force now (configured, or for `auto` announced by the upstream or learned)",
  ),
  source: BatchSource,
  product: z.string(),
  createdAt: z.iso.datetime(),
  finishedAt: z.iso.datetime().optional(),
  sealed: z.boolean().describe('every input row is stored'),
  finished: z.boolean().describe('every plate has an outcome'),
  state: z
    .enum(['running', 'finished', 'archived'])
    .describe(
      'archived: finished, kept in the archive folder only (results still download); counts are those at archiving',
    ),
  archivedAt: z.iso.datetime().optional().describe('when the batch was archived and deleted from Redis'),
  metadata: z.record(z.string(), z.unknown()),
  extraColumns: z.array(z.string()).describe('the input columns besides the plate, carried to the results'),
  maxCreates: count.optional().describe("the batch's cap on creates, when it has one"),
  counts: BatchCounts,
  cost: z
    .object({
      amount: z
        .number()
        .describe('creates that left × the price per query + polls that left × the price per poll (0 unless set)'),
      currency: z.string().describe('ISO 4217, e.g. BRL'),
      perQuery: z.number().describe('the price per query created in force'),
      perPoll: z.number().describe('the price per poll in force (0: polls are not charged)'),
      maxSpend: z.number().optional().describe("the batch's creates cap in money, when it has a cap"),
      reported: z
        .object({
          amount: z.number().describe('the prices the answers stated (x-query-cost), added up'),
          answers: z.number().int().describe('answers that said anything of their price'),
          billed: z.number().int().describe('answers that said x-billed: true'),
          notBilled: z.number().int().describe('answers that said x-billed: false'),
        })
        .optional()
        .describe("what the upstream's own answers said of their price, beside the estimate, when any did"),
    })
    .optional()
    .describe("the batch's spend, when its account has a price (VQ_PRICE_PER_QUERY or the account's pricePerQuery)"),
  progress: z.object({
    percent: z.number().describe('finished plates (done + failed) per enqueued plate, 0–100'),
    finished: count,
    of: count,
  }),
  waiting: Waiting.optional().describe('why nothing moves, while the batch is unfinished'),
  waitingForKeys: z
    .array(WaitingForKey)
    .optional()
    .describe(
      'keys that stopped with paid plates of the batch on them: only the key that created a query can read it, ' +
        'so those plates wait for it (nothing is paid again)',
    ),
  deadline: DeadlineStatus.optional().describe("the batch's deadline, its ETA range and slack, when it has one"),
  eta: z
    .object({ seconds: z.number().int(), at: z.iso.datetime() })
    .optional()
    .describe(
      "rough estimate from the remaining plates, requests per plate so far and the batch's share of its account's rate",
    ),
  callbackUrl: z.string().optional().describe("where the batch's webhooks go"),
  webhooks: z
    .array(WebhookDelivery)
    .optional()
    .describe('the webhooks sent for this batch and what became of each, when it has a callbackUrl'),
  links: BatchLinks,
});
/** A batch as every front door shows it: the HTTP API, the library and `vqb status --json`. */
export type BatchView = z.output<typeof BatchView>;
