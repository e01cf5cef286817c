// zod schemas as fastify route schemas: JSON Schema (OpenAPI 3.0 flavour) for the document, and a
// per-route validator compiler that validates with zod itself. Bodies are strict (no type
// coercion: `"plates": "ABC1234"` is an error, not a list of one); query strings are coerced by
// their schemas, since everything in a URL is a string.
import type { FastifySchemaCompiler } from 'fastify';
import { z } from 'zod';
import { ApiError } from './errors.js';
import { jsonReply, tidy } from './openapi.js';

type JsonSchema = Record<string, unknown>;

/** A request part's schema for the document: its input side, so defaulted fields read as optional. */
export function requestSchema(schema: z.ZodType): JsonSchema {
  return z.toJSONSchema(schema, {
    target: 'openapi-3.0',
    io: 'input',
    override: ({ jsonSchema }) => tidy(jsonSchema as JsonSchema, 'input'),
  }) as JsonSchema;
}

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400:
    'BAD_REQUEST (unreadable body), VALIDATION_FAILED (wrong fields or types), CSV_JSON_ENCODED ' +
    '(a CSV sent as a JSON string), or an input code such as BAD_BATCH_ID',
  401: 'UNAUTHORIZED: no service token, or not a valid one',
  404:
    'NOT_FOUND: no such batch (or not one this token may see); ACCOUNT_NOT_FOUND: no such ' +
    'account for this token; POOL_NOT_FOUND: no such pool of keys for this token',
  408: 'REQUEST_TIMEOUT: the request did not arrive within VQ_HTTP_REQUEST_TIMEOUT',
  409: 'BATCH_ID_TAKEN: a batch with this id holds other content',
  413: 'PAYLOAD_TOO_LARGE (VQ_HTTP_BODY_LIMIT) or TOO_MANY_PLATES (VQ_HTTP_MAX_PLATES)',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'the CSV could not be used: CSV_BINARY, CSV_EMPTY, CSV_NO_PLATE_COLUMN, CSV_UNSUPPORTED_ENCODING, …',
  500: 'INTERNAL',
  503: 'AUTH_NOT_CONFIGURED (no service tokens) or REDIS_UNAVAILABLE',
};

/** Error responses for the document, all in the upstream's error shape. */
export function errorResponses(...statuses: number[]): Record<number, JsonSchema> {
  return Object.fromEntries(
    statuses.map((status) => [status, jsonReply('Error', ERROR_DESCRIPTIONS[status] ?? 'error')]),
  );
}

type Part = 'body' | 'querystring' | 'params' | 'headers';

/**
 * Validates each request part with its zod schema and replaces it with the parsed value (defaults
 * filled, query strings coerced). A body of another media type than JSON (a CSV stream) is not
 * validated here: its reader checks it.
 */
export function zodValidator(parts: Partial<Record<Part, z.ZodType>>): FastifySchemaCompiler<unknown> {
  return ({ httpPart, contentType }) => {
    const schema = parts[httpPart as Part];
    if (
      schema === undefined ||
      (httpPart === 'body' && contentType !== undefined && contentType !== 'application/json')
    ) {
      return () => true;
    }
    return (data: unknown) => {
      // fastify hands a missing body over as null; an optional body schema means "may be absent".
      const result = schema.safeParse(httpPart === 'body' && data === null ? undefined : data);
      return result.success ? { value: result.data } : { error: validationError(httpPart ?? 'request', result.error) };
    };
  };
}

export function validationError(part: string, error: z.ZodError): ApiError {
  const issues = error.issues.slice(0, 3).map((issue) => `${pathText(part, issue.path)}: ${issue.message}`);
  const more = error.issues.length > 3 ? ` (and ${error.issues.length - 3} more)` : '';
  return new ApiError('VALIDATION_FAILED', `${issues.join('; ')}${more}`);
}

function pathText(part: string, path: readonly PropertyKey[]): string {
  let text = part;
  for (const key of path) text += typeof key === 'number' ? `[${key}]` : `.${String(key)}`;
  return text;
}
