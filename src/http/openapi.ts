// The OpenAPI document's shared parts: the named schemas (components.schemas, built from the zod
// schemas in schemas.ts), `$ref`s to them for the routes' `schema:` blocks, and the document's
// head (servers, tags, security). The names are what generated clients call their types, so a
// name here is part of the API: rename one only with the API's version.
import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  AccountLineView,
  BatchCounts,
  BatchView,
  CostEstimate,
  CreateBatchBody,
  CreateBatchForm,
  CreateBatchReply,
  DeadlineJudgement,
  DeadlineStatus,
  DeleteReply,
  DryRunReply,
  ErrorReply,
  HealthReply,
  ListReply,
  Priority,
  Reject,
  ResultRow,
  RetryOptions,
  RetryReply,
  UpstreamResult,
  Waiting,
  WebhookDelivery,
} from '../schemas/api.js';
import { CreateWatchBody, UpdateWatchBody, WatchListReply, WatchReply } from '../schemas/watch.js';

type JsonSchema = Record<string, unknown>;

/** Request bodies, published as what a client sends (a defaulted field is optional). */
const REQUESTS = {
  CreateBatchBody,
  CreateBatchForm,
  RetryBody: RetryOptions,
  CreateWatchBody,
  UpdateWatchBody,
} as const;

/** Answers, and the named parts they share. */
const ANSWERS = {
  Error: ErrorReply,
  Batch: BatchView,
  BatchCounts,
  Waiting,
  Priority,
  CreateBatchReply,
  Reject,
  CostEstimate,
  DeadlineJudgement,
  DeadlineStatus,
  DryRunReply,
  BatchList: ListReply,
  RetryReply,
  DeleteReply,
  Health: HealthReply,
  // The published name stays AccountLine (clients' types); in code the class queue/line.ts owns that name.
  AccountLine: AccountLineView,
  ResultRow,
  UpstreamResult,
  WebhookDelivery,
  Watch: WatchReply,
  WatchList: WatchListReply,
} as const;

export type ComponentName = keyof typeof REQUESTS | keyof typeof ANSWERS;

const SCHEMAS_PATH = '#/components/schemas/';

export function ref(name: ComponentName): { $ref: string } {
  return { $ref: `${SCHEMAS_PATH}${name}` };
}

/** An answer whose JSON body is a named schema. */
export function jsonReply(name: ComponentName, description: string): JsonSchema {
  return { description, content: { 'application/json': { schema: ref(name) } } };
}

/**
 * Every named schema as JSON Schema (the OpenAPI 3.0 flavour), each reference to another named
 * schema a `$ref`. Answers are open (no `additionalProperties: false`): a field added later must
 * not break a client that validates; request bodies stay strict, as the server is.
 */
export function componentSchemas(): Record<string, JsonSchema> {
  return { ...convert(REQUESTS, 'input'), ...convert(ANSWERS, 'output') };
}

/** One group's schemas; a reference to a schema of the other group is inlined (Priority in a request). */
function convert(group: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(group)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    target: 'openapi-3.0',
    io,
    uri: (id) => `${SCHEMAS_PATH}${id}`,
    override: ({ jsonSchema }) => tidy(jsonSchema as JsonSchema, io),
  });
  return Object.fromEntries(
    Object.keys(group).map((id) => [id, plainRefs(withoutId(schemas[id] as JsonSchema)) as JsonSchema]),
  );
}

/**
 * `{allOf: [{$ref}]}` alone (an optional named schema) → `{$ref}`; with a description beside it,
 * 3.0's only way to describe a reference, it stays.
 */
function plainRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(plainRefs);
  if (typeof node !== 'object' || node === null) return node;
  const entries = Object.entries(node).map(([key, value]) => [key, plainRefs(value)] as const);
  const out = Object.fromEntries(entries) as JsonSchema;
  const allOf = out.allOf;
  return Array.isArray(allOf) && allOf.length === 1 && Object.keys(out).length === 1 ? allOf[0] : out;
}

function withoutId(schema: JsonSchema): JsonSchema {
  const { $id: _id, ...rest } = schema;
  return rest;
}

/** Noise a reader and a generator do without: a date-time's regex, the safe-integer bounds of every int. */
export function tidy(schema: JsonSchema, io: 'input' | 'output'): void {
  if (schema.format === 'date-time') delete schema.pattern;
  if (schema.maximum === Number.MAX_SAFE_INTEGER) delete schema.maximum;
  if (schema.minimum === Number.MIN_SAFE_INTEGER) delete schema.minimum;
  if (io === 'output' && schema.additionalProperties === false) delete schema.additionalProperties;
}

const SECURITY = [{ bearer: [] }, { apiKey: [] }];

/** Registers @fastify/swagger with the document's head and named schemas; routes add their paths. */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'vqb',
        version: '1',
        description:
          "Bulk Brazilian vehicle look-ups, paced under the upstream's limits. Every `/v1` route " +
          'needs a service token. ' +
          'Errors: `{statusCode, error: {code, message}}` (`Error`); branch on `error.code`.',
      },
      tags: [
        {
          name: 'batches',
          description: "Plates in, one batch per request; progress, results and retries of an account's batches",
        },
        {
          name: 'watches',
          description: 'Watch lists: plates re-checked on a schedule, reporting only what changed (docs/watch.md)',
        },
        { name: 'operations', description: 'Health and this document; no token' },
      ],
      security: SECURITY,
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'a service token (VQ_API_TOKENS / VQ_API_TOKENS_FILE, or an account’s tokens)',
          },
          apiKey: {
            type: 'apiKey',
            in: 'header',
            name: 'x-api-key',
            description: 'the same service token, as a header',
          },
        },
        schemas: componentSchemas(),
      },
    },
  });
}

/**
 * GET /openapi.json, no token. `servers` is VQ_PUBLIC_URL when set, else `/` (relative to where the
 * document was fetched from): never the request's Host header, which a client chooses (a cache or
 * a proxy keeping the answer would hand other readers a server the client named).
 */
export function openApiRoute(app: FastifyInstance, publicUrl: string | undefined): void {
  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'getOpenApiDocument',
        summary: 'This document',
        tags: ['operations'],
        security: [],
        response: {
          200: {
            description: 'the OpenAPI 3.0 document of this API',
            content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
          },
          '4xx': jsonReply('Error', 'BAD_REQUEST (an unreadable URL), HEADERS_TOO_LARGE'),
        },
      },
    },
    async () => {
      const { openapi, info, ...rest } = app.swagger() as unknown as JsonSchema;
      return { openapi, info, servers: [{ url: publicUrl ?? '/', description: 'this server' }], ...rest };
    },
  );
}
