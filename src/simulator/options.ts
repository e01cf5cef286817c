// The simulator's settings: their types, defaults and one zod schema that validates every way they
// arrive (startSimulator options, a --config JSON file, CLI flags, PATCH /__admin/config).
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { checkPlate } from '../plates.js';
import { parseRateLimit } from '../setting-values.js';
import { ANSWER_SHAPES, type AnswerShapeName } from './answers.js';

export type WindowKind = 'fixed' | 'sliding' | 'token-bucket';
export type Permission = 'run_queries' | 'view_queries' | 'issue_crlv' | 'run_batch';
export const PERMISSIONS: readonly Permission[] = ['run_queries', 'view_queries', 'issue_crlv', 'run_batch'];

/** Human names, as the provider's key screen shows them; 403 messages quote them. */
export const PERMISSION_LABELS: Record<Permission, string> = {
  run_queries: 'Run vehicle queries',
  view_queries: 'View queries already run',
  issue_crlv: 'Issue CRLV Digital',
  run_batch: 'Run batch queries',
};

/** Plan presets from the provider's docs; a key with a plan gets these limits unless it sets its own. */
export const PLANS = {
  starter: { rateLimit: '60/min', dailyQuota: 1_000 },
  professional: { rateLimit: '300/min', dailyQuota: 10_000 },
  enterprise: { rateLimit: null, dailyQuota: null },
} as const;
export type Plan = keyof typeof PLANS;

export interface KeySpec {
  key: string;
  /** Names the key in stats (`byKey`); default `key1`, `key2`… in the order listed. */
  label?: string;
  /** Default: all four permissions. */
  permissions?: Permission[];
  /** Milliseconds since the epoch or an ISO date; absent = never expires. */
  expiresAt?: number | string;
  plan?: Plan;
  /** Per-key override of the global rate limit (`null` = unlimited). */
  rateLimit?: string | null;
  /** Per-key override of the global daily quota (`null` = unlimited). */
  dailyQuota?: number | null;
  /**
   * Another key (its `key`) whose rate limit and quota this one spends too: two keys of one
   * contract, one quota upstream. Both announce the same counts (X-RateLimit-*).
   */
  sharesWith?: string;
}

export interface SimulatorOptions {
  host: string;
  /** 0 = any free port. */
  port: number;
  /** Product slugs accepted by POST /queries/integration/:slug. */
  products: string[];
  keys: KeySpec[];
  /** Per key, e.g. `60/min`, `5/s`, `10/2s`. */
  rateLimit: string;
  window: WindowKind;
  /** Counted requests per key per quota window (creates and gets alike). */
  dailyQuota: number;
  /** `null` = the quota resets at the next UTC midnight; a number = fixed windows of that length from start. */
  quotaWindowMs: number | null;
  /** A query completes after a uniform random delay in [min, max] ms from its creation. */
  completionMs: [number, number];
  failRate: number;
  /** Plates (normalised on load) whose queries always end FAILED / VEHICLE_NOT_FOUND. */
  failPlates: string[];
  /** Share of creates answered already COMPLETED (or FAILED) with the result inline. */
  terminalOnCreateRate: number;
  /** After this many ms from creation a GET answers 404 QUERY_NOT_FOUND; `null` = never. */
  queryTtlMs: number | null;
  /** false = success bodies are sent bare, without `{statusCode, body}`. */
  envelope: boolean;
  idField: 'queryId' | 'id';
  /** The shape success bodies come in (simulator/answers.ts); `default` follows envelope and idField. */
  answers: AnswerShapeName;
  /** The answers switch to `shape` once this many queries were created (an upstream that changed mid-batch). */
  answersAfter: { creates: number; shape: AnswerShapeName } | null;
  /** Share of counted requests answered 500/502/503 (502 with an HTML body) without processing. */
  errorRate: number;
  latencyMs: [number, number];
  /** Share of counted requests whose socket is destroyed without a response, before processing. */
  dropRate: number;
  /** Share of creates that create the query and then destroy the socket (outcome unknown to the client). */
  dropAfterCreateRate: number;
  /** Larger request bodies get 413 PAYLOAD_TOO_LARGE. */
  maxBodyBytes: number;
  /** false = no X-RateLimit-* headers, as an upstream that documents none (clients then learn only from 429s). */
  rateLimitHeaders: boolean;
  // Faults after the query was created (made, and paid), so the client cannot know it from the answer:
  /** Share of creates answered only after `slowCreateMs` (past the client's timeout). */
  slowCreateRate: number;
  slowCreateMs: number;
  /** Share of creates answered 502 with a gateway's HTML page (not the upstream's JSON envelope). */
  gatewayErrorAfterCreateRate: number;
  /** Share of creates whose 201 body is cut off by a connection reset part-way. */
  cutBodyAfterCreateRate: number;
  /** Share of creates answered 201 with a complete but truncated (unparseable) JSON body. */
  truncatedBodyAfterCreateRate: number;
  /** Share of creates whose 201 headers go out and whose body never comes. */
  stallBodyAfterCreateRate: number;
  /** Share of queries whose first poll is answered 404 QUERY_NOT_FOUND (an upstream not knowing a new query yet). */
  pollNotFoundOnceRate: number;
  /** `Retry-After` of a 429 as delta-seconds (default) or an HTTP date. */
  retryAfterFormat: 'seconds' | 'date';
  /**
   * An upstream that states its price: creates answered with `x-query-cost: <this>` and
   * `x-billed: true`, polls with `x-billed: false`. null (default): no such header, as the contract.
   */
  queryCost: string | null;
}

export const DEFAULT_KEYS: KeySpec[] = [
  { key: 'demo-key', permissions: [...PERMISSIONS] },
  { key: 'demo-view-only', permissions: ['view_queries'] },
  { key: 'demo-expired', permissions: [...PERMISSIONS], expiresAt: '2020-01-01T00:00:00.000Z' },
];

export const DEFAULT_OPTIONS: Readonly<SimulatorOptions> = Object.freeze<SimulatorOptions>({
  host: '127.0.0.1',
  port: 0,
  products: ['agregados'],
  keys: DEFAULT_KEYS,
  rateLimit: '600/min',
  window: 'sliding',
  dailyQuota: 100_000,
  quotaWindowMs: null,
  completionMs: [5_000, 15_000],
  failRate: 0,
  failPlates: [],
  terminalOnCreateRate: 0,
  queryTtlMs: null,
  envelope: true,
  idField: 'queryId',
  answers: 'default',
  answersAfter: null,
  errorRate: 0,
  latencyMs: [0, 0],
  dropRate: 0,
  dropAfterCreateRate: 0,
  maxBodyBytes: 1_048_576,
  rateLimitHeaders: true,
  slowCreateRate: 0,
  slowCreateMs: 40_000,
  gatewayErrorAfterCreateRate: 0,
  cutBodyAfterCreateRate: 0,
  truncatedBodyAfterCreateRate: 0,
  stallBodyAfterCreateRate: 0,
  pollNotFoundOnceRate: 0,
  retryAfterFormat: 'seconds',
  queryCost: null,
});

const rate = z.number().min(0).max(1);
const rateLimitText = z.string().refine((v) => parseRateLimit(v) !== undefined, 'a rate such as 60/min, 5/s or 10/2s');
const range = z
  .tuple([z.number().min(0), z.number().min(0)])
  .refine(([min, max]) => min <= max, 'min must not exceed max');
const plate = z.string().transform((v, ctx) => {
  const check = checkPlate(v);
  if (!check.ok) {
    ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} is not a plate: ${check.message}` });
    return z.NEVER;
  }
  return check.plate;
});

export const keySpecSchema = z.strictObject({
  key: z.string().min(1),
  label: z.string().min(1).max(64).optional(),
  permissions: z.array(z.enum(PERMISSIONS as [Permission, ...Permission[]])).optional(),
  expiresAt: z.union([z.number(), z.iso.datetime({ offset: true })]).optional(),
  plan: z.enum(Object.keys(PLANS) as [Plan, ...Plan[]]).optional(),
  rateLimit: rateLimitText.nullable().optional(),
  dailyQuota: z.number().int().min(0).nullable().optional(),
  sharesWith: z.string().min(1).optional(),
});

/** Every field optional; unknown fields are an error (a typo must not silently do nothing). */
export const optionsPatchSchema = z.strictObject({
  host: z.string().min(1).optional(),
  port: z.number().int().min(0).max(65_535).optional(),
  products: z
    .array(z.string().regex(/^[a-z0-9-]+$/i))
    .min(1)
    .optional(),
  keys: z.array(keySpecSchema).optional(),
  rateLimit: rateLimitText.optional(),
  window: z.enum(['fixed', 'sliding', 'token-bucket']).optional(),
  dailyQuota: z.number().int().min(0).optional(),
  quotaWindowMs: z.number().int().min(1).nullable().optional(),
  completionMs: range.optional(),
  failRate: rate.optional(),
  failPlates: z.array(plate).optional(),
  terminalOnCreateRate: rate.optional(),
  queryTtlMs: z.number().int().min(1).nullable().optional(),
  envelope: z.boolean().optional(),
  idField: z.enum(['queryId', 'id']).optional(),
  answers: z.enum(ANSWER_SHAPES).optional(),
  answersAfter: z
    .strictObject({ creates: z.number().int().min(0), shape: z.enum(ANSWER_SHAPES) })
    .nullable()
    .optional(),
  errorRate: rate.optional(),
  latencyMs: range.optional(),
  dropRate: rate.optional(),
  dropAfterCreateRate: rate.optional(),
  maxBodyBytes: z.number().int().min(1).optional(),
  rateLimitHeaders: z.boolean().optional(),
  slowCreateRate: rate.optional(),
  slowCreateMs: z.number().int().min(0).optional(),
  gatewayErrorAfterCreateRate: rate.optional(),
  cutBodyAfterCreateRate: rate.optional(),
  truncatedBodyAfterCreateRate: rate.optional(),
  stallBodyAfterCreateRate: rate.optional(),
  pollNotFoundOnceRate: rate.optional(),
  retryAfterFormat: z.enum(['seconds', 'date']).optional(),
  queryCost: z
    .string()
    .regex(/^\d+(\.\d{1,6})?$/, 'an amount such as 0.35')
    .nullable()
    .optional(),
});

/** Validates a patch and returns it with plates normalised; throws a ConfigError naming the bad field. */
export function validatePatch(patch: unknown, source = 'simulator options'): Partial<SimulatorOptions> {
  const result = optionsPatchSchema.safeParse(patch);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.join('.') : '(root)';
    throw new ConfigError(where, `${issue?.message ?? 'invalid'} (${source})`);
  }
  // zod leaves absent keys absent, which is what exactOptionalPropertyTypes wants.
  return result.data as Partial<SimulatorOptions>;
}

export function resolveOptions(patch: Partial<SimulatorOptions> = {}): SimulatorOptions {
  const valid = validatePatch(patch);
  return { ...DEFAULT_OPTIONS, ...valid };
}
