// Every error code vqb raises on purpose, defined once: what it means, the HTTP status the API
// answers with, the exit code the CLI ends with. The error classes (src/errors.ts,
// src/http/errors.ts, src/upstream/errors.ts) take their codes from here, the API reads the status
// here and the CLI the exit code, so a new code cannot silently become a 422 or a 500:
// test/unit/error-codes.test.ts fails when a thrown code has no entry.
//
// Input that cannot be read at all is 400; input that was read but cannot be used is 422. Exit
// code 2 is "fix the command, its settings or its input" (a setting, the command line, a file that
// is not there or cannot be used: nothing ran), 1 "it ran and failed", 3 "an account cannot go on",
// 4 "stopped where the user asked" (a spending cap reached: a normal outcome, not a failure).

export interface ErrorCodeEntry {
  /** HTTP status when the API answers with this code. */
  status: number;
  /** CLI exit code. */
  exit: 1 | 2 | 3 | 4;
  /** The code the API client sees, when it differs (kept for clients written against it). */
  apiCode?: string;
  means: string;
}

const entry = (status: number, exit: 1 | 2 | 3 | 4, means: string, apiCode?: string): ErrorCodeEntry => ({
  status,
  exit,
  means,
  ...(apiCode ? { apiCode } : {}),
});

/** The same reader codes for CSV and for .xlsx (the .xlsx reader prefixes them XLSX_). */
const READER = {
  EMPTY: 'the file has no rows',
  BINARY: 'the file is not text (not a CSV)',
  UNREADABLE: 'the file could not be read as CSV',
  UNSUPPORTED_ENCODING: 'a text encoding vqb does not read',
  MIXED_ENCODING: 'rows in different text encodings',
  FIELD_TOO_LARGE: 'a field over the size limit',
  ROW_TOO_LARGE: 'a row over the size limit',
  NO_PLATE_COLUMN: 'no column holds plates',
} as const;

const readerCodes = <P extends string>(prefix: P) =>
  Object.fromEntries(
    Object.entries(READER).map(([name, means]) => [
      `${prefix}_${name}`,
      entry(name === 'UNREADABLE' ? 400 : 422, 2, means),
    ]),
  ) as Record<`${P}_${keyof typeof READER}`, ErrorCodeEntry>;

export const ERROR_CODES = {
  // Settings and usage
  CONFIG_INVALID: entry(500, 2, 'a setting is missing or malformed'),
  USAGE: entry(400, 2, 'a command was used wrongly'),
  PORT_IN_USE: entry(500, 2, 'a port to listen on is held by another process'),
  BAD_OPTIONS: entry(400, 1, 'options a function does not take, or of the wrong type'),
  // Redis
  ACCOUNT_STOPPED: entry(409, 3, 'the account was paused or held before a request was sent; nothing was sent'),
  REDIS_UNAVAILABLE: entry(503, 1, 'Redis cannot be reached'),
  REDIS_FULL: entry(507, 1, 'Redis reached maxmemory and refused a write'),
  REDIS_UNREPLICATED: entry(503, 1, 'no Redis replica acknowledged a paid write (it is held and written again)'),
  REDIS_EVICTION_POLICY: entry(503, 1, 'Redis would evict keys (maxmemory-policy is not noeviction)'),
  LAYOUT_MIGRATION_NEEDED: entry(503, 2, "Redis holds data of vqb 0.1.0's key layout: run `vqb migrate` once"),
  REDIS_SERVER_MISSING: entry(500, 1, 'no redis-server binary for the demo'),
  REDIS_SERVER_FAILED: entry(500, 1, 'the demo could not start its redis-server'),
  // Batches
  // Exit 2: an id that names no batch is the command's to fix (docs/cli.md), like an unknown account.
  BATCH_NOT_FOUND: entry(404, 2, 'no batch with that id', 'NOT_FOUND'),
  BATCH_ID_TAKEN: entry(409, 1, 'the batch id is held by a batch of the same account with other content'),
  BATCH_ID_AMBIGUOUS: entry(409, 2, 'several accounts hold a batch of that id; name the account'),
  BATCH_RUNNING: entry(409, 1, 'the batch still has plates running'),
  BATCH_ARCHIVED: entry(409, 1, 'the same content was archived; its results are in the archive'),
  ARCHIVE_FAILED: entry(500, 1, 'an archive could not be written or did not read back'),
  ACCOUNT_NOT_FOUND: entry(404, 2, 'no account with that id'),
  // `vqb run` only (the API's batches wait at a cap): exports written of what finished, the rest pending.
  SPENDING_CAP_REACHED: entry(
    402,
    4,
    'a run stopped at a spending cap the user set; its exports hold what finished, the rest marked pending',
  ),
  // Watch lists (src/watch/)
  WATCH_NOT_FOUND: entry(404, 2, "no watch list of that name (for this token's accounts)"),
  WATCH_AMBIGUOUS: entry(409, 2, 'watch lists of that name in several accounts: name the account'),
  WATCH_EXISTS: entry(409, 2, 'the account has a watch list of that name already'),
  WATCH_BAD_NAME: entry(422, 2, 'a watch list name that is not 1-64 letters, digits, _ and -'),
  WATCH_BAD_SCHEDULE: entry(422, 2, 'a watch schedule that cannot be read: a duration, cron line or window'),
  WATCH_NO_PLATES: entry(422, 2, 'a watch list with no valid plate'),
  WATCH_ROUND_NOT_FOUND: entry(404, 2, 'no compared round of that number in the watch list'),
  POOL_NOT_FOUND: entry(404, 2, 'no pool of keys with that name (or the account named is not one of its keys)'),
  POOL_INVALID: entry(
    500,
    2,
    'a pool in the accounts file joins accounts of another product or owner, or is declared on a Redis Cluster',
  ),
  NO_PRICE: entry(422, 2, 'a spending cap in money, and no price per query set to turn it into creates'),
  BAD_WEIGHT: entry(400, 1, 'a weight is a whole number from 1 to 1000'),
  BAD_BATCH_ID: entry(400, 2, 'a batch id of the wrong form'),
  TOO_MANY_PLATES: entry(413, 1, 'more plates than one request takes'),
  BODY_MISSING: entry(400, 2, 'a request that needs a body came without one'),
  TOO_MANY_REQUESTS: entry(429, 1, 'more requests a minute than this token (or an address without one) may send'),
  TOO_MANY_FOR_INTERACTIVE: entry(422, 2, 'an interactive batch over VQ_INTERACTIVE_MAX plates'),
  BAD_DEADLINE: entry(400, 2, 'a deadline that cannot be read, or already past (docs/plans.md)'),
  DEADLINE_NOT_FEASIBLE: entry(
    422,
    2,
    'a deadline the batch cannot meet, refused as asked (--require-deadline, requireDeadline); nothing stored or paid',
  ),
  CSV_JSON_ENCODED: entry(400, 1, 'a CSV sent as a JSON string'),
  // Input files
  INPUT_NOT_FOUND: entry(422, 2, 'the input file does not exist or cannot be read'),
  ...readerCodes('CSV'),
  ...readerCodes('XLSX'),
  XLSX_INVALID: entry(422, 2, 'not a readable .xlsx workbook'),
  XLSX_TOO_LARGE: entry(413, 2, 'the workbook is over the size limit'),
  XLSX_ENCRYPTED: entry(422, 2, 'the workbook is password-protected'),
  XLSX_NO_SHEET: entry(422, 2, 'the workbook has no sheet'),
  XLSX_SHEET_NOT_FOUND: entry(422, 2, 'no sheet of that name'),
  // Drop folder
  INBOX_BAD_NAME: entry(422, 1, 'a file name the drop folder does not take'),
  INBOX_NOT_A_FILE: entry(422, 1, 'not a regular file'),
  INBOX_OUTSIDE_ROOT: entry(422, 1, 'a path outside the drop folder'),
  INBOX_NAME_EXHAUSTED: entry(500, 1, 'no free name left to move the file to'),
  INBOX_BAD_SIDECAR: entry(422, 1, "a dropped file's sidecar (<name>.json) that cannot be used"),
  // Exports
  EXPORT_BAD_BATCH_ID: entry(400, 1, 'a batch id that cannot name an export file'),
  EXPORT_DIR_UNUSABLE: entry(500, 1, 'the export folder cannot be written'),
  EXPORT_SOURCE_UNSTABLE: entry(500, 1, 'the batch kept changing while its export was written'),
  // Webhooks
  CALLBACK_URL_INVALID: entry(422, 1, 'a callbackUrl that is not an absolute http(s) URL'),
  CALLBACK_HOST_NOT_ALLOWED: entry(422, 1, "a callbackUrl host not on the server's allow-list"),
  CALLBACK_ADDRESS_FORBIDDEN: entry(422, 1, 'a callbackUrl host that is or resolves to an internal address'),
  CALLBACK_HOST_UNRESOLVED: entry(422, 1, 'a callbackUrl host name that does not resolve'),
  WEBHOOK_SECRET_MISSING: entry(422, 1, 'webhooks are asked for and the server has no signing secret'),
  // The HTTP API's own answers
  UNAUTHORIZED: entry(401, 1, 'no valid service token'),
  AUTH_NOT_CONFIGURED: entry(503, 1, 'the server has no service tokens configured'),
  CSRF: entry(403, 1, 'a console form without its CSRF token'),
  CROSS_SITE: entry(403, 1, 'a console sign-in posted from another site'),
  SIGN_IN_THROTTLED: entry(429, 1, 'too many failed console sign-ins from one address; wait'),
  TOO_MANY_STREAMS: entry(429, 1, 'a console session holds as many live-update streams as it may'),
  TOO_MANY_UPLOADS: entry(429, 1, 'the console holds as many unconfirmed uploads as it may (a session, or in all)'),
  NOT_FOUND: entry(404, 1, 'no such resource'),
  BAD_FORM: entry(400, 1, 'a console form that cannot be read'),
  VALIDATION_FAILED: entry(400, 1, 'a request that does not match the API schema'),
  PAYLOAD_TOO_LARGE: entry(413, 1, 'a request body over the limit'),
  UNSUPPORTED_MEDIA_TYPE: entry(415, 1, 'a content type the route does not take'),
  // The upstream (raised by the client, recorded in outcomes; the worker acts on them, see workers/actions.ts)
  INVALID_API_KEY: entry(502, 1, 'the upstream refused the API key'),
  EXPIRED_API_KEY: entry(502, 1, 'the API key has expired'),
  INSUFFICIENT_PERMISSIONS: entry(502, 1, 'the API key lacks a permission'),
  RATE_LIMIT_EXCEEDED: entry(503, 1, 'the upstream asked to wait'),
  BAD_RESPONSE: entry(502, 1, 'the upstream answered with a body vqb cannot use'),
  // Never a plate's outcome: the account holds with it (`vqb run` exits 3) until a setting reads the answer.
  UNRECOGNISED_ANSWER: entry(502, 3, 'the upstream answered in a shape vqb cannot read (no id, or an unknown state)'),
} as const satisfies Record<string, ErrorCodeEntry>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}

/** The entry of a code; codes vqb passes through from elsewhere (the upstream's own, HTTP_5xx) have none. */
export function errorCodeEntry(code: string): ErrorCodeEntry | undefined {
  return isErrorCode(code) ? ERROR_CODES[code] : undefined;
}
