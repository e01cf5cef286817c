// The shapes of /v1/watches (docs/watch.md): a watch list as sent and as answered, and the
// change lines of a round. The names of the schemas are part of the API (openapi.ts).
import { z } from 'zod';
import { AccountId, CallbackUrl } from './batch.js';

const Overlap = z.enum(['wait', 'skip']).describe('a round due while the last runs: waits for it, or is skipped');
const Notify = z.enum(['plate', 'round']).describe('plate.changed per changed plate, or one watch.round_finished');
const Format = z.enum(['csv', 'jsonl', 'xlsx']);

export const CreateWatchBody = z
  .strictObject({
    name: z.string().min(1).max(64).describe('letters, digits, _ and -; unique within the account'),
    plates: z.array(z.string().max(64)).min(1).max(100_000).describe('the plates to watch'),
    account: AccountId.optional().describe("the account that pays (default: the token's first)"),
    pool: z.string().min(1).max(64).optional().describe('a pool of keys (refused where pools are not available)'),
    every: z.string().max(32).optional().describe('a round every 30m, 12h, 7d… (or cron)'),
    cron: z.string().max(128).optional().describe('a cron line in UTC, e.g. "0 3 * * 1" (or every)'),
    window: z.string().max(16).optional().describe('HH:MM-HH:MM in UTC: rounds start only inside it'),
    overlap: Overlap.optional(),
    notify: Notify.optional(),
    callbackUrl: CallbackUrl.optional(),
    ignore: z.array(z.string().min(1).max(256)).max(100).optional().describe('fields never reported as changed'),
    perMonth: z.number().int().min(0).optional().describe('month budget in creates'),
    perMonthSpend: z.number().min(0).optional().describe("month budget in money, at the account's price"),
    format: Format.optional().describe("the rounds' exports (default csv)"),
  })
  .describe('a new watch list');
export type CreateWatchBody = z.output<typeof CreateWatchBody>;

export const UpdateWatchBody = z
  .strictObject({
    perMonth: z.number().int().min(0).nullable().optional().describe('a new month budget (null: none)'),
    addPlates: z.array(z.string().max(64)).max(100_000).optional(),
    removePlates: z.array(z.string().max(64)).max(100_000).optional(),
  })
  .describe('changes to a watch list');
export type UpdateWatchBody = z.output<typeof UpdateWatchBody>;

export const WatchParams = z.object({ name: z.string().min(1).max(64) });
export type WatchParams = z.output<typeof WatchParams>;

export const WatchQuery = z.object({ account: AccountId.optional() });
export type WatchQuery = z.output<typeof WatchQuery>;

export const ChangesQuery = z.object({
  account: AccountId.optional(),
  round: z.coerce.number().int().min(1).optional().describe('default: the last compared round'),
  format: Format.optional().describe('default jsonl'),
});
export type ChangesQuery = z.output<typeof ChangesQuery>;

const Round = z.object({
  round: z.number().int(),
  batchId: z.string(),
  plates: z.number().int(),
  startedAt: z.string(),
  closedAt: z.string().optional(),
  changedPlates: z.number().int().optional(),
  changes: z.number().int().optional(),
  firstRecord: z.boolean().optional(),
  creates: z.number().int().optional(),
  failed: z.number().int().optional().describe('plates that failed in the round (their last known result stands)'),
});

export const WatchReply = z.object({
  name: z.string(),
  account: z.string(),
  every: z.string().optional(),
  cron: z.string().optional(),
  window: z.string().optional(),
  overlap: Overlap,
  notify: Notify,
  callbackUrl: z.string().optional(),
  ignore: z.array(z.string()),
  perMonth: z.number().int().optional(),
  spentThisMonth: z.number().int(),
  format: Format,
  plates: z.number().int(),
  paused: z.boolean(),
  state: z.enum(['idle', 'running', 'overlap', 'held', 'window', 'paused']),
  reason: z.string().optional().describe('why the watch waits or holds, in words'),
  round: z.number().int().describe('the last round started'),
  skipped: z.number().int(),
  nextAt: z.string().optional(),
  rounds: z.array(Round),
});
export type WatchReply = z.output<typeof WatchReply>;

export const WatchListReply = z.object({ watches: z.array(WatchReply) });
export type WatchListReply = z.output<typeof WatchListReply>;
