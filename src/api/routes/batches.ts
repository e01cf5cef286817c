// /v1: enqueue plates (JSON or CSV), follow batches, stream their results, retry failed plates.
// Every route here needs a service token (the onRequest hook runs before any body is read).
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../../config.js';
import { canSee, type Scope, type TokenAuth } from '../../http/auth.js';
import { batchAccess } from '../../http/batch-access.js';
import { bodyTooLarge, csvJsonEncoded, tooManyPlates } from '../../http/csv-body.js';
import { ApiError } from '../../http/errors.js';
import { jsonReply, ref } from '../../http/openapi.js';
import { readPlateUpload } from '../../http/plate-upload.js';
import { type CountRequest, registerApiRateLimit } from '../../http/rate-limit.js';
import { type CsvUpload, readCsvUpload, registerCsvUploads } from '../../http/uploads.js';
import { errorResponses, requestSchema, zodValidator } from '../../http/validation.js';
import { batchContext, batchContexts } from '../../presenters/batch-context.js';
import {
  type BatchRequest,
  type EnqueueInput,
  type EnqueueResult,
  enqueue,
  estimate,
} from '../../producers/enqueue.js';
import { XLSX_MEDIA_TYPE } from '../../producers/xlsx.js';
import type { BatchInfo, BatchStore } from '../../queue/batch/store.js';
import { rerunFailed } from '../../queue/rerun.js';
import type { BatchRef } from '../../redis/keys.js';
import { Retention } from '../../retention.js';
import {
  BatchParams,
  type BatchView,
  CreateBatchBody,
  CreateBatchQuery,
  type CreateBatchReply,
  DeleteQuery,
  type DeleteReply,
  type DryRunReply,
  ListQuery,
  type ListReply,
  ResultsQuery,
  RetryBody,
  type RetryReply,
} from '../../schemas/api.js';
import type { QueueServices } from '../../services.js';
import { archiveFor } from '../../sinks/export.js';
import { batchResults } from '../../sinks/results.js';
import { archivedBatchView, batchLinks, batchView } from '../views.js';
import { watchRoutes } from './watches.js';

export interface V1Options {
  services: QueueServices;
  config: Config;
  auth: TokenAuth;
  now: () => number;
}

const SECURITY = [{ bearer: [] }, { apiKey: [] }];
const CSV_TYPES = ['text/csv', 'application/csv'];
/** The raw file bodies POST /v1/batches takes: a CSV, or an Excel workbook. */
const FILE_TYPES = [...CSV_TYPES, XLSX_MEDIA_TYPE];
const MAX_REJECTS = 100;

export async function v1Routes(app: FastifyInstance, options: V1Options): Promise<void> {
  // Counted before the token check and before any body is read (v1Kit's onRequest hook).
  const count = await registerApiRateLimit(app, {
    redis: options.services.redis,
    nameSpace: options.services.keys.apiRateLimit,
    perMinute: options.config.http.rateLimitPerMin,
  });
  const kit = v1Kit(app, options, count);
  const { bodyLimit } = kit;
  // No route here takes text/plain: without fastify's default parser for it, such a body is 415
  // (with it, a string body passed validation meant for JSON and failed in the handler).
  app.removeContentTypeParser('text/plain');
  await registerCsvUploads(app, { bodyLimit, uploadRoute: '/v1/batches' });
  // A CSV or .xlsx body is handed over as the raw stream: readPlateUpload meters and reads it.
  app.addContentTypeParser(FILE_TYPES, (request, payload, done) => {
    if (request.routeOptions.url !== '/v1/batches') {
      done(
        new ApiError('UNSUPPORTED_MEDIA_TYPE', 'only POST /v1/batches takes text/csv or .xlsx; send application/json'),
        undefined,
      );
      return;
    }
    if (Number(request.headers['content-length']) > bodyLimit) {
      done(bodyTooLarge(bodyLimit), undefined);
      return;
    }
    done(null, payload);
  });

  createRoutes(app, kit);
  readRoutes(app, kit);
  changeRoutes(app, kit);
  watchRoutes(app, kit);
}

/** What every route group of /v1 uses: the stores, the token's scope of each request, the archive. */
function v1Kit(app: FastifyInstance, options: V1Options, count: CountRequest) {
  const { services, config, auth, now } = options;
  const { bodyLimit, maxPlates } = config.http;
  const dryRun = async (input: EnqueueInput, options: BatchRequest): Promise<DryRunReply> => ({
    dryRun: true,
    estimate: await estimate(services, input, options),
  });

  // What each request's token may see; a scoped token's other accounts answer 404, as if absent.
  const scopes = new WeakMap<object, Scope>();
  app.addHook('onRequest', async (request, reply) => {
    // The token is checked once; whether it passed says which count the request goes to.
    const checked = await auth.check(request.headers).then(
      (scope) => ({ scope }),
      (error: unknown) => ({ error }),
    );
    await count(request, reply, 'scope' in checked);
    if ('error' in checked) throw checked.error;
    scopes.set(request, checked.scope);
  });
  const scopeOf = (request: object): Scope => scopes.get(request) ?? { admin: false, accounts: [] };
  const access = batchAccess(services, archiveFor(config, now));
  const visibleBatch = (request: object, id: string) => access.batch(scopeOf(request), id);
  /** The account a new batch goes to: the one asked for, if the token may use it; else the token's first. */
  const accountFor = (request: object, wanted: string | undefined): string => {
    const scope = scopeOf(request);
    const id = wanted ?? (scope.admin ? config.accounts[0]?.id : scope.accounts[0]);
    if (id === undefined || !canSee(scope, id) || !config.accounts.some((a) => a.id === id)) {
      throw new ApiError('ACCOUNT_NOT_FOUND', `no account ${JSON.stringify(wanted ?? '')} for this token`);
    }
    return id;
  };
  /**
   * The account, or the pool and its home, a new batch goes to. A pool is the token's only when it
   * may see every key of it (the accounts file holds a pool's keys to one owner): else 404, as if absent.
   */
  const accountOrPool = (
    request: object,
    wanted: string | undefined,
    pool: string | undefined,
  ): { account: string } | { pool: string; account?: string } => {
    if (pool === undefined) return { account: accountFor(request, wanted) };
    const scope = scopeOf(request);
    const keys = config.accounts.filter((a) => a.pool === pool);
    if (keys.length === 0 || !keys.every((a) => canSee(scope, a.id)))
      throw new ApiError('POOL_NOT_FOUND', `no pool ${JSON.stringify(pool)} for this token`);
    return { pool, ...(wanted !== undefined ? { account: accountFor(request, wanted) } : {}) };
  };
  // Retention: batches pruned from Redis answer from their archive (read-only: status and results).
  const archive = archiveFor(config, now);
  const retention = new Retention(services, archive, { retainMs: config.retention.retainMs, now, logger: app.log });
  const visibleArchive = (request: object, id: string) => access.archived(scopeOf(request), id);
  const visibleRef = (request: object, id: string) => access.ref(scopeOf(request), id);
  const view = async (info: BatchInfo, at: number): Promise<BatchView> =>
    batchView(info, await batchContext(services, info), at);

  return {
    services,
    config,
    now,
    bodyLimit,
    maxPlates,
    dryRun,
    scopes,
    scopeOf,
    visibleBatch,
    visibleRef,
    accountFor,
    accountOrPool,
    archive,
    retention,
    visibleArchive,
    view,
  };
}

type V1Kit = ReturnType<typeof v1Kit>;

/** What POST /v1/batches was sent, as the enqueue module takes it: a file (body or form) or a JSON list. */
async function readCreateRequest(
  request: FastifyRequest<{ Body: CreateBatchBody | Readable; Querystring: CreateBatchQuery }>,
  kit: V1Kit,
): Promise<{ input: EnqueueInput; options: BatchRequest; dryRun: boolean }> {
  const { bodyLimit, maxPlates, accountOrPool } = kit;
  const { body, query } = request;
  // No body at all (no content type, or an empty one): nothing reached the validator to refuse.
  if ((body === undefined || body === null) && !request.isMultipart())
    throw new ApiError(
      'BODY_MISSING',
      'send the plates: a JSON body {"plates": ["ABC1D23", …]}, a text/csv or .xlsx body, or a ' +
        'multipart form with a file',
    );
  if (body instanceof Readable || request.isMultipart()) {
    // A file: a text/csv or .xlsx body with its options in the query, or a form's `file` with its fields.
    const fileOptions = {
      bodyLimit,
      maxPlates,
      ...(query.column !== undefined ? { column: query.column } : {}),
      ...(query.sheet !== undefined ? { sheet: query.sheet } : {}),
    };
    const upload: CsvUpload =
      body instanceof Readable
        ? {
            csv: await readPlateUpload(body, undefined, request.headers['content-type'], fileOptions),
            options: query,
          }
        : await readCsvUpload(request, { bodyLimit, maxPlates });
    const { csv, options: csvOptions } = upload;
    // Without a name (a text/csv body, a form's file with none), the content alone finds its batch.
    const name = csvOptions.name ?? upload.fileName?.slice(0, 100);
    const input: EnqueueInput = {
      source: 'api',
      ...(name !== undefined ? { name } : {}),
      digest: csv.digest,
      rows: csv.rows,
      extraColumns: csv.header.extraColumns,
    };
    const options: BatchRequest = {
      ...(csvOptions.force !== undefined ? { force: csvOptions.force } : {}),
      ...(csvOptions.maxCreates !== undefined ? { maxCreates: csvOptions.maxCreates } : {}),
      ...(csvOptions.maxSpend !== undefined ? { maxSpend: csvOptions.maxSpend } : {}),
      ...(csvOptions.reuseWithinMs !== undefined ? { reuseWithinMs: csvOptions.reuseWithinMs } : {}),
      ...accountOrPool(request, csvOptions.account, csvOptions.pool),
      ...(csvOptions.priority !== undefined ? { priority: csvOptions.priority } : {}),
      ...(csvOptions.weight !== undefined ? { weight: csvOptions.weight } : {}),
      ...(csvOptions.callbackUrl !== undefined ? { callbackUrl: csvOptions.callbackUrl } : {}),
      ...(csvOptions.deadline !== undefined ? { deadline: csvOptions.deadline } : {}),
      ...(csvOptions.requireDeadline !== undefined ? { requireDeadline: csvOptions.requireDeadline } : {}),
    };
    return { input, options, dryRun: csvOptions.dryRun === true };
  } else {
    const input: EnqueueInput = {
      source: 'api',
      plates: body.plates,
      ...(body.name !== undefined ? { name: body.name } : {}),
    };
    const options: BatchRequest = {
      ...(body.metadata !== undefined ? { metadata: body.metadata } : {}),
      ...(body.batchId !== undefined ? { batchId: body.batchId } : {}),
      ...(body.force !== undefined ? { force: body.force } : {}),
      ...(body.maxCreates !== undefined ? { maxCreates: body.maxCreates } : {}),
      ...(body.maxSpend !== undefined ? { maxSpend: body.maxSpend } : {}),
      ...(body.reuseWithinMs !== undefined ? { reuseWithinMs: body.reuseWithinMs } : {}),
      ...accountOrPool(request, body.account, body.pool),
      ...(body.priority !== undefined ? { priority: body.priority } : {}),
      ...(body.weight !== undefined ? { weight: body.weight } : {}),
      ...(body.callbackUrl !== undefined ? { callbackUrl: body.callbackUrl } : {}),
      ...(body.deadline !== undefined ? { deadline: body.deadline } : {}),
      ...(body.requireDeadline !== undefined ? { requireDeadline: body.requireDeadline } : {}),
    };
    return { input, options, dryRun: body.dryRun === true };
  }
}

/** POST /v1/batches: a JSON list, a CSV or .xlsx body, or a form; a dry run or the batch. */
function createRoutes(app: FastifyInstance, kit: V1Kit): void {
  const { services, now, maxPlates, dryRun, view } = kit;
  app.post<{ Body: CreateBatchBody | Readable; Querystring: CreateBatchQuery }>(
    '/batches',
    {
      schema: {
        operationId: 'createBatch',
        summary: 'Enqueue plates as a new batch (or find the batch this same content made before)',
        description:
          'JSON `{plates, …options}` (`CreateBatchBody`); or a CSV or Excel .xlsx file, as a ' +
          '`multipart/form-data` upload (the file as `file`, options as fields: `CreateBatchForm`) ' +
          'or as a `text/csv` or ' +
          '`application/vnd.openxmlformats-officedocument.spreadsheetml.sheet` body (its bytes as ' +
          'they are, options in the query string). ' +
          'A workbook is read from its first visible sheet, or the one named by `sheet`; formulas ' +
          'give their cached results, never evaluated. A CSV sent as a JSON string is refused (400 ' +
          '`CSV_JSON_ENCODED`). ' +
          'The batch id is derived from the content: the same content again answers the same batch ' +
          'with `created: false` and enqueues nothing.',
        tags: ['batches'],
        security: SECURITY,
        querystring: requestSchema(CreateBatchQuery),
        body: {
          content: {
            'application/json': { schema: ref('CreateBatchBody') },
            'multipart/form-data': { schema: ref('CreateBatchForm') },
            'text/csv': {
              schema: {
                type: 'string',
                format: 'binary',
                description: 'a CSV file: `;`, `,` or tab, UTF-8 or Windows-1252, with or without a header',
              },
            },
            [XLSX_MEDIA_TYPE]: {
              schema: {
                type: 'string',
                format: 'binary',
                description:
                  'an Excel .xlsx workbook: its first visible sheet, or `sheet`; the same header rules as a CSV',
              },
            },
          },
        },
        response: {
          200: jsonReply('DryRunReply', 'dryRun: what the batch would cost; nothing stored, nothing sent upstream'),
          202: jsonReply('CreateBatchReply', 'accepted: the batch, its first rejects and links'),
          ...errorResponses(400, 401, 404, 409, 413, 415, 422, 503),
        },
      },
      validatorCompiler: zodValidator({ querystring: CreateBatchQuery, body: CreateBatchBody }),
      // Before validation, so a huge list is refused without checking every item.
      preValidation: async (request) => {
        // A generated client's text body, JSON-encoded under application/json: not a list of plates.
        if (typeof request.body === 'string' && /[\r\n]/.test(request.body)) throw csvJsonEncoded();
        const body = request.body as { plates?: unknown } | null | undefined;
        if (body && !(body instanceof Readable) && Array.isArray(body.plates) && body.plates.length > maxPlates)
          throw tooManyPlates(maxPlates);
      },
    },
    async (request, reply) => {
      const { input, options, dryRun: dry } = await readCreateRequest(request, kit);
      if (dry) return reply.code(200).send(await dryRun(input, options));
      const result: EnqueueResult = await enqueue(services, input, options);
      const { batch, created } = result;
      const [batchReply, rejects] = await Promise.all([
        view(batch, now()),
        firstRejects(services.batches, batch, batch.counts.rejected),
      ]);
      const links = batchLinks(batch.id);
      request.log.info(
        {
          batchId: batch.id,
          created,
          rows: batch.counts.total,
          enqueued: batch.counts.enqueued,
          rejected: batch.counts.rejected,
        },
        created ? 'batch enqueued' : 'batch already known',
      );
      const reply202: CreateBatchReply = {
        batch: { ...batchReply, created },
        rejects,
        ...(result.deadline ? { deadline: result.deadline } : {}),
        links,
      };
      return reply.code(202).header('location', links.self).send(reply202);
    },
  );
}

/** GET: the batch list, one batch, its results. */
function readRoutes(app: FastifyInstance, kit: V1Kit): void {
  const { services, config, now, scopeOf, visibleBatch, archive, visibleArchive, visibleRef, view } = kit;
  app.get<{ Querystring: ListQuery }>(
    '/batches',
    {
      schema: {
        operationId: 'listBatches',
        summary: 'List batches, newest first',
        tags: ['batches'],
        security: SECURITY,
        querystring: requestSchema(ListQuery),
        response: { 200: jsonReply('BatchList', 'a page of batches'), ...errorResponses(400, 401, 503) },
      },
      validatorCompiler: zodValidator({ querystring: ListQuery }),
    },
    async (request): Promise<ListReply> => {
      const { offset, limit } = request.query;
      const scope = scopeOf(request);
      // Each account's own list (an administrator's: every configured account's).
      const { total, batches } = await services.batchViews.list(
        offset,
        limit,
        scope.admin ? config.accounts.map((a) => a.id) : scope.accounts,
      );
      const at = now();
      const page = (o: number) => `/v1/batches?offset=${o}&limit=${limit}`;
      return {
        total,
        offset,
        limit,
        batches: (await batchContexts(services, batches)).map((context, i) => batchView(batches[i]!, context, at)),
        links: {
          ...(offset + limit < total ? { next: page(offset + limit) } : {}),
          ...(offset > 0 ? { prev: page(Math.max(0, offset - limit)) } : {}),
        },
      };
    },
  );

  app.get<{ Params: BatchParams }>(
    '/batches/:id',
    {
      schema: {
        operationId: 'getBatch',
        summary: 'A batch: counts, progress, why it waits, a rough ETA',
        tags: ['batches'],
        security: SECURITY,
        params: requestSchema(BatchParams),
        response: { 200: jsonReply('Batch', 'the batch'), ...errorResponses(400, 401, 404, 503) },
      },
      validatorCompiler: zodValidator({ params: BatchParams }),
    },
    async (request): Promise<BatchView> => {
      const manifest = await visibleArchive(request, request.params.id);
      if (manifest !== undefined) return archivedBatchView(manifest, now());
      return view(await visibleBatch(request, request.params.id), now());
    },
  );

  app.get<{ Params: BatchParams; Querystring: ResultsQuery }>(
    '/batches/:id/results',
    {
      schema: {
        operationId: 'getBatchResults',
        summary: "One row per input row, streamed; unfinished plates are 'pending'",
        description:
          '`format=jsonl` (default): `application/x-ndjson`, one `ResultRow` JSON object per line ' +
          "(the schema given is a line's), as the JSONL export. " +
          "`format=csv`: `text/csv`, the CSV export's columns (UTF-8 with BOM, VQ_CSV_DELIMITER; " +
          'result fields as `result.a.b`). ' +
          '`format=xlsx`: an Excel workbook, the same columns and rows as typed cells (numbers, ' +
          'dates, booleans, text; never a formula) on sheet `results`, rejected rows on sheet `rejects`.',
        tags: ['batches'],
        security: SECURITY,
        params: requestSchema(BatchParams),
        querystring: requestSchema(ResultsQuery),
        response: {
          200: {
            description:
              'the rows, in input order: application/x-ndjson, one ResultRow per line; or text/csv; ' +
              'or an .xlsx workbook',
            content: {
              'application/x-ndjson': { schema: ref('ResultRow') },
              'text/csv': {
                schema: { type: 'string', description: 'the CSV export: a header row, then one row per input row' },
              },
              [XLSX_MEDIA_TYPE]: {
                schema: {
                  type: 'string',
                  format: 'binary',
                  description: 'the .xlsx export: sheets `results` and `rejects`',
                },
              },
            },
          },
          ...errorResponses(400, 401, 404, 503),
        },
      },
      validatorCompiler: zodValidator({ params: BatchParams, querystring: ResultsQuery }),
    },
    async (request, reply) => {
      const results = await batchResults(
        services,
        await visibleRef(request, request.params.id),
        request.query.format,
        config.csvDelimiter,
        request.log,
        archive,
      );
      return reply
        .type(results.contentType)
        .header('content-disposition', `attachment; filename="${results.fileName}"`)
        .send(results.body);
    },
  );
}

/** DELETE a batch (archive first; cancel its unsent plates), POST …/retry its failed plates. */
function changeRoutes(app: FastifyInstance, kit: V1Kit): void {
  const { services, now, visibleBatch, retention, visibleRef } = kit;
  app.delete<{ Params: BatchParams; Querystring: DeleteQuery }>(
    '/batches/:id',
    {
      schema: {
        operationId: 'deleteBatch',
        summary: 'Archive a finished batch and delete it from Redis (its results stay downloadable)',
        description:
          'The exports and a manifest are written to the archive folder (VQ_ARCHIVE_DIR) and read ' +
          'back (sha256, row counts) before any Redis key of the batch is deleted. ' +
          'A running batch is refused (409 `BATCH_RUNNING`) unless `cancel=true`: plates not yet ' +
          'sent are dropped (outcome `CANCELLED`, no charge); ' +
          'plates already created run to the end (202 `cancelling`) and the batch is archived once ' +
          'they have. An archive that cannot be written or verified deletes nothing (500 `ARCHIVE_FAILED`).',
        tags: ['batches'],
        security: SECURITY,
        params: requestSchema(BatchParams),
        querystring: requestSchema(DeleteQuery),
        response: {
          200: jsonReply('DeleteReply', 'archived and deleted from Redis (or archived before)'),
          202: jsonReply('DeleteReply', 'cancelled: created plates still run; archived when they finish'),
          ...errorResponses(400, 401, 404, 409, 500, 503),
        },
      },
      validatorCompiler: zodValidator({ params: BatchParams, querystring: DeleteQuery }),
    },
    async (request, reply) => {
      const { id } = request.params;
      // Scoped tokens delete only their accounts' batches (others answer 404, as if absent).
      const result = await retention.delete(await visibleRef(request, id), { cancel: request.query.cancel });
      const links = batchLinks(id);
      if (result.state === 'cancelling') {
        const body: DeleteReply = {
          batchId: id,
          state: 'cancelling',
          dropped: result.dropped,
          running: result.running,
          links,
        };
        return reply.code(202).send(body);
      }
      request.log.info(
        { batchId: id, folder: result.folder, alreadyArchived: result.alreadyArchived },
        'batch deleted (archived)',
      );
      const body: DeleteReply = {
        batchId: id,
        state: 'archived',
        alreadyArchived: result.alreadyArchived,
        archivedAt: new Date(result.archivedAt).toISOString(),
        files: result.files,
        links,
      };
      return reply.code(200).send(body);
    },
  );

  app.post<{ Params: BatchParams; Body: RetryBody }>(
    '/batches/:id/retry',
    {
      schema: {
        operationId: 'retryBatch',
        summary: 'Run the failed plates again',
        description:
          'Plates with a queryId poll that query again (no charge); `recreate: true` creates every ' +
          'failed plate anew (a charge each).',
        tags: ['batches'],
        security: SECURITY,
        params: requestSchema(BatchParams),
        body: { content: { 'application/json': { schema: ref('RetryBody') } } },
        response: {
          202: jsonReply('RetryReply', 'the failed plates are queued again'),
          ...errorResponses(400, 401, 404, 415, 503),
        },
      },
      validatorCompiler: zodValidator({ params: BatchParams, body: RetryBody }),
    },
    async (request, reply) => {
      const { id } = request.params;
      const batch = await visibleBatch(request, id);
      const result = await rerunFailed(services, batch, { recreate: request.body?.recreate === true, now });
      request.log.info({ batchId: id, ...result }, 'failed plates queued again');
      const body: RetryReply = { batchId: id, ...result, links: { self: batchLinks(id).self } };
      return reply.code(202).send(body);
    },
  );
}

/** The first rejected rows of a batch, read from its stored rows (none to read when none were rejected). */
async function firstRejects(
  batches: BatchStore,
  batch: BatchRef,
  rejected: number,
): Promise<CreateBatchReply['rejects']> {
  const out: CreateBatchReply['rejects'] = [];
  if (rejected === 0) return out;
  for await (const row of batches.rows(batch)) {
    if (row.kind !== 'rejected') continue;
    out.push({ row: row.row, input: row.input, reason: row.reason, message: row.message });
    if (out.length >= MAX_REJECTS) break;
  }
  return out;
}
