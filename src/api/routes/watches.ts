// /v1/watches: watch lists over HTTP (docs/watch.md), tenant-scoped like batches: a token sees and
// changes only its accounts' watches; another account's answers 404 WATCH_NOT_FOUND, as if absent.

import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { clock } from '../../clock.js';
import type { Scope } from '../../http/auth.js';
import { jsonReply, ref } from '../../http/openapi.js';
import { errorResponses, requestSchema, zodValidator } from '../../http/validation.js';
import {
  ChangesQuery,
  CreateWatchBody,
  UpdateWatchBody,
  type WatchListReply,
  WatchParams,
  WatchQuery,
} from '../../schemas/watch.js';
import type { QueueServices } from '../../services.js';
import { XLSX_CONTENT_TYPE } from '../../sinks/xlsx.js';
import { writeChanges } from '../../watch/changes-export.js';
import { checkWatchPlates } from '../../watch/plates.js';
import type { WatchRef } from '../../watch/store.js';
import { watchReply } from '../../watch/view.js';
import { Watches } from '../../watch/watches.js';

const SECURITY = [{ bearer: [] }, { apiKey: [] }];
const TAGS = ['watches'];
const MEDIA = { csv: 'text/csv; charset=utf-8', jsonl: 'application/x-ndjson', xlsx: XLSX_CONTENT_TYPE } as const;

export function watchRoutes(
  app: FastifyInstance,
  kit: { services: QueueServices; scopeOf: (request: object) => Scope },
): void {
  const { services, scopeOf } = kit;
  const watches = new Watches(services, app.log as unknown as Logger);
  app.addHook('onClose', async () => watches.close());
  /** The accounts the request's token may see, in the deployment's order. */
  const visible = (request: object): string[] => {
    const scope = scopeOf(request);
    const all = services.config.accounts.map((a) => a.id);
    return scope.admin ? all : all.filter((a) => scope.accounts.includes(a));
  };
  const found = (request: object, name: string, account: string | undefined) =>
    watches.find(name, visible(request), account);
  listRoutes(app, { services, watches, visible });
  oneRoutes(app, { watches, found });
  changesRoute(app, { services, watches, found });
}

interface WatchKit {
  services: QueueServices;
  watches: Watches;
  visible: (request: object) => string[];
  found: (request: object, name: string, account: string | undefined) => Promise<WatchRef>;
}

/** GET and POST /v1/watches. */
function listRoutes(app: FastifyInstance, { watches, visible }: Pick<WatchKit, 'services' | 'watches' | 'visible'>) {
  app.get(
    '/watches',
    {
      schema: {
        operationId: 'listWatches',
        summary: "The token's watch lists",
        tags: TAGS,
        security: SECURITY,
        response: { 200: jsonReply('WatchList', 'the watch lists'), ...errorResponses(401, 503) },
      },
    },
    async (request) => {
      const body: WatchListReply = { watches: (await watches.list(visible(request))).map(watchReply) };
      return body;
    },
  );

  app.post<{ Body: CreateWatchBody }>(
    '/watches',
    {
      schema: {
        operationId: 'createWatch',
        summary: 'Watch a list of plates: a round on a schedule, reporting only what changed',
        tags: TAGS,
        security: SECURITY,
        body: { content: { 'application/json': { schema: ref('CreateWatchBody') } } },
        response: {
          201: jsonReply('Watch', 'stored; an `every` watch starts its first round now'),
          ...errorResponses(400, 401, 404, 409, 422, 503),
        },
      },
      validatorCompiler: zodValidator({ body: CreateWatchBody }),
    },
    async (request, reply) => {
      const { plates, ...rest } = request.body;
      const checked = checkWatchPlates(plates);
      const view = await watches.add(rest, checked.plates, visible(request));
      return reply.code(201).send(watchReply(view));
    },
  );
}

/** One watch: read, change, pause, resume, delete, its changes. */
function oneRoutes(app: FastifyInstance, { watches, found }: Pick<WatchKit, 'watches' | 'found'>) {
  const one = {
    tags: TAGS,
    security: SECURITY,
    params: requestSchema(WatchParams),
    querystring: requestSchema(WatchQuery),
  };
  app.get<{ Params: WatchParams; Querystring: WatchQuery }>(
    '/watches/:name',
    {
      schema: {
        operationId: 'getWatch',
        summary: 'A watch list: its state, why it waits, its rounds',
        ...one,
        response: { 200: jsonReply('Watch', 'the watch list'), ...errorResponses(401, 404, 409, 503) },
      },
      validatorCompiler: zodValidator({ params: WatchParams, querystring: WatchQuery }),
    },
    async (request) => watchReply(await watches.show(await found(request, request.params.name, request.query.account))),
  );

  app.patch<{ Params: WatchParams; Querystring: WatchQuery; Body: UpdateWatchBody }>(
    '/watches/:name',
    {
      schema: {
        operationId: 'updateWatch',
        summary: 'Change the month budget (a held round goes on), add or remove plates',
        ...one,
        body: { content: { 'application/json': { schema: ref('UpdateWatchBody') } } },
        response: { 200: jsonReply('Watch', 'the watch list'), ...errorResponses(400, 401, 404, 409, 503) },
      },
      validatorCompiler: zodValidator({ params: WatchParams, querystring: WatchQuery, body: UpdateWatchBody }),
    },
    async (request) => {
      const ref = await found(request, request.params.name, request.query.account);
      const { perMonth, addPlates, removePlates } = request.body;
      const now = clock.now();
      if (addPlates !== undefined) await watches.store.addPlates(ref, checkWatchPlates(addPlates).plates, now);
      if (removePlates !== undefined) await watches.store.removePlates(ref, checkWatchPlates(removePlates).plates, now);
      if (perMonth !== undefined) await watches.setBudget(ref, perMonth);
      return watchReply(await watches.show(ref));
    },
  );

  for (const action of ['pause', 'resume'] as const)
    app.post<{ Params: WatchParams; Querystring: WatchQuery }>(
      `/watches/:name/${action}`,
      {
        schema: {
          operationId: `${action}Watch`,
          summary: action === 'pause' ? 'No more rounds start (a running one finishes)' : 'Rounds start again',
          ...one,
          response: { 200: jsonReply('Watch', 'the watch list'), ...errorResponses(401, 404, 409, 503) },
        },
        validatorCompiler: zodValidator({ params: WatchParams, querystring: WatchQuery }),
      },
      async (request) => {
        const ref = await found(request, request.params.name, request.query.account);
        return watchReply(action === 'pause' ? await watches.pause(ref) : await watches.resume(ref));
      },
    );

  app.delete<{ Params: WatchParams; Querystring: WatchQuery }>(
    '/watches/:name',
    {
      schema: {
        operationId: 'deleteWatch',
        summary: 'Forget a watch list (a running round finishes as an ordinary batch)',
        ...one,
        response: { 204: { description: 'removed' }, ...errorResponses(401, 404, 409, 503) },
      },
      validatorCompiler: zodValidator({ params: WatchParams, querystring: WatchQuery }),
    },
    async (request, reply) => {
      await watches.remove(await found(request, request.params.name, request.query.account));
      return reply.code(204).send();
    },
  );
}

/** GET /v1/watches/{name}/changes: a round's change lines as a file. */
function changesRoute(
  app: FastifyInstance,
  { services, watches, found }: Pick<WatchKit, 'services' | 'watches' | 'found'>,
) {
  app.get<{ Params: WatchParams; Querystring: ChangesQuery }>(
    '/watches/:name/changes',
    {
      schema: {
        operationId: 'getWatchChanges',
        summary: "A round's changes: one line per changed field (round, plate, field, before, after, at)",
        tags: TAGS,
        security: SECURITY,
        params: requestSchema(WatchParams),
        querystring: requestSchema(ChangesQuery),
        response: {
          200: {
            description: 'the changes (JSONL, CSV or .xlsx)',
            content: {
              'application/x-ndjson': {
                schema: {
                  type: 'string',
                  description: 'one JSON object per line: round, plate, field, before, after, at',
                },
              },
              'text/csv': { schema: { type: 'string', description: 'a header row, then one row per change' } },
              [XLSX_CONTENT_TYPE]: { schema: { type: 'string', format: 'binary', description: 'sheet `changes`' } },
            },
          },
          ...errorResponses(400, 401, 404, 409, 503),
        },
      },
      validatorCompiler: zodValidator({ params: WatchParams, querystring: ChangesQuery }),
    },
    async (request, reply) => {
      const ref = await found(request, request.params.name, request.query.account);
      const format = request.query.format ?? 'jsonl';
      const { round, changes } = await watches.changes(ref, request.query.round);
      const out = new PassThrough();
      void writeChanges(out, changes, format, services.config.csvDelimiter).catch((err: unknown) =>
        out.destroy(err as Error),
      );
      return reply
        .type(MEDIA[format])
        .header('content-disposition', `attachment; filename="watch-${ref.name}-${round}.changes.${format}"`)
        .send(out);
    },
  );
}
