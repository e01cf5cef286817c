import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import { canSee, type Scope, type TokenAuth } from '../http/auth.js';
import { ApiError, closeIfBodyPending, describeError } from '../http/errors.js';
import { readCsvUpload, registerCsvUploads } from '../http/uploads.js';
import type { Logger } from '../logger.js';
import { costOf, createsCap, formatMoney, type Price } from '../money.js';
import { parseDeadline } from '../plans/deadline.js';
import { batchContext, batchContexts } from '../presenters/batch-context.js';
import { archivedBatchView, batchView } from '../presenters/batch-view.js';
import { CONSOLE_PAUSE_REASON } from '../presenters/waits.js';
import { type BatchRequest, checkRequest, type EnqueueInput, enqueue, estimate } from '../producers/enqueue.js';
import type { BatchInfo } from '../queue/batch/store.js';
import type { AccountLineState } from '../queue/line.js';
import { failedSummary, type RetryWay, rerunFailed } from '../queue/rerun.js';
import { duplicateOf } from '../redis/connection.js';
import type { RedisHealth } from '../redis/health.js';
import { ResultsQuery } from '../schemas/api.js';
import type { BatchView } from '../schemas/batch.js';
import type { QueueServices } from '../services.js';
import { archiveFor } from '../sinks/export.js';
import { batchRejects, batchResults } from '../sinks/results.js';
import {
  CALLBACK_ADDRESS_FORBIDDEN,
  CALLBACK_HOST_NOT_ALLOWED,
  CALLBACK_HOST_UNRESOLVED,
  CALLBACK_URL_INVALID,
  WEBHOOK_SECRET_MISSING,
} from '../webhooks/target.js';
import { CONTENT_SECURITY_POLICY, CSS, ICON_SVG, JS } from './assets.js';
import { accountUse, batchChartData, sampleBatch } from './chart-data.js';
import { batchCharts } from './charts.js';
import { OpenStreams, streamEvents } from './events.js';
import { FailedPlates } from './failed-plates.js';
import { type Key, LANG_COOKIE, LANGS } from './i18n.js';
import { consoleKit, type Kit, type Signed, SignInNeeded } from './kit.js';
import { CONSOLE_LIMITS, type ConsoleLimits } from './limits.js';
import {
  ASSET_CSS,
  ASSET_ICON,
  ASSET_JS,
  batchFields,
  batchPage,
  confirmRetryPage,
  errorPage,
  estimatePage,
  failedKey,
  failedSection,
  type ListSearch,
  listPage,
  type PageContext,
  type UploadValues,
  uploadPage,
} from './pages.js';
import { localPath } from './redirect.js';
import { errorText, plural } from './say.js';
import { idHash, SESSION_COOKIE, SessionStore } from './sessions.js';
import { sessionRoutes } from './sign-in.js';
import { SignInThrottle } from './throttle.js';
import { StagedUploads } from './uploads.js';
import { WakeNews } from './wake-news.js';
import { watchRoutes } from './watch-routes.js';

export interface ConsoleDeps {
  services: QueueServices;
  config: Config;
  auth: TokenAuth;
  logger: Logger;
  now: () => number;
  /** This process's view of Redis: a full or lost Redis is why every line waits. */
  health?: Pick<RedisHealth, 'waitReason'>;
  /** Smaller limits for tests; the rest are CONSOLE_LIMITS. */
  limits?: Partial<ConsoleLimits>;
}

export interface ConsoleHandle {
  /** The scope of the request's console session, or undefined (no cookie, expired, token revoked). */
  sessionScope(request: FastifyRequest): Promise<Scope | undefined>;
}

/** Formats the results route offers: the API's own list (ResultsQuery), so a new format appears here by itself. */
export const RESULT_FORMATS: readonly string[] = ResultsQuery.shape.format.unwrap().options;

/** The callbackUrl refusals (src/webhooks/target.ts) the upload page words in the operator's language. */
const CALLBACK_REFUSALS = new Set([
  CALLBACK_URL_INVALID,
  CALLBACK_HOST_NOT_ALLOWED,
  CALLBACK_ADDRESS_FORBIDDEN,
  CALLBACK_HOST_UNRESOLVED,
  WEBHOOK_SECRET_MISSING,
]);

/** Batches the list page (and its live updates) show. */
const LIST_LIMIT = 50;
/** The newest batches a search of the list looks at (their names read 500 a round trip). */
const SEARCHED_BATCHES = 5_000;

/** The retries the batch page offers (pages.ts failedSection). */
const RETRY_WAYS: readonly RetryWay[] = ['poll', 'ask'];

export async function registerConsole(app: FastifyInstance, deps: ConsoleDeps): Promise<ConsoleHandle> {
  const { services, config, auth, now } = deps;
  const redisWait = () => deps.health?.waitReason;
  // Batches retention pruned from Redis: their page and downloads answer from the archive, as /v1 does.
  const archive = archiveFor(config, now);
  const limits: ConsoleLimits = {
    ...CONSOLE_LIMITS,
    stagedBytesTotal: config.http.consoleUploadsMax,
    ...deps.limits,
  };
  const sessions = new SessionStore(services.redis, services.keys);
  const uploads = new StagedUploads(services.redis, services.keys, limits, now);
  const throttle = new SignInThrottle(services.redis, services.keys, limits);
  const { redis, keys, outcomes } = services;
  const failedPlates = new FailedPlates({ redis, keys, outcomes, now, logger: deps.logger });
  // Global (fastify-plugin): the dashboard's guard reads the session cookie too.
  await app.register(cookie);

  const signedIn = new WeakMap<FastifyRequest, Signed | null>();
  const resolve = async (request: FastifyRequest): Promise<Signed | undefined> => {
    const known = signedIn.get(request);
    if (known !== undefined) return known ?? undefined;
    let found: Signed | undefined;
    const session = await sessions.get(request.cookies[SESSION_COOKIE]);
    if (session) {
      try {
        found = { session, scope: await auth.checkDigest(session.tokenDigest) };
      } catch {
        // The token was removed (or no tokens remain): the session ends with it.
        await sessions.delete(session.id);
      }
    }
    signedIn.set(request, found ?? null);
    return found;
  };

  const streams = new OpenStreams();
  // New work, heard once for every page of this process that shows only finished batches.
  const wakes = new WakeNews(async (onWake) => {
    const subscriber = duplicateOf(services.redis);
    try {
      await services.feeder.listen(subscriber, onWake);
    } catch (err) {
      subscriber.disconnect();
      throw err;
    }
    return () => subscriber.disconnect();
  });
  // Live updates never end by themselves: close them so the server can stop.
  app.addHook('preClose', async () => {
    streams.endAll();
    await wakes.close();
  });

  await app.register(async (scope) => {
    // Pages for people, not part of the HTTP API's contract: kept out of /openapi.json.
    scope.addHook('onRoute', (route) => {
      route.schema = { ...route.schema, hide: true };
    });
    await scope.register(formbody, { bodyLimit: 16_384 });
    await registerCsvUploads(scope, { bodyLimit: config.http.bodyLimit, uploadRoute: '/upload' });

    const kit = consoleKit({
      ...{ services, config, auth, now, redisWait, archive, sessions, uploads, resolve, streams, wakes },
      ...{ limits, throttle, failedPlates },
    });
    pageHooks(scope, kit);
    assetRoutes(scope);
    sessionRoutes(scope, kit);
    batchRoutes(scope, kit);
    eventRoutes(scope, kit);
    downloadRoutes(scope, kit);
    accountRoutes(scope, kit);
    uploadRoutes(scope, kit);
    watchRoutes(scope, kit);
  });

  return {
    async sessionScope(request) {
      return (await resolve(request))?.scope;
    },
  };
}

/** Security headers on every page, and errors as pages in the reader's language. */
function pageHooks(scope: FastifyInstance, kit: Kit): void {
  const { resolve, context, page } = kit;
  scope.addHook('onSend', async (_request, reply, payload) => {
    reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('x-frame-options', 'DENY');
    reply.header('referrer-policy', 'same-origin');
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  scope.setErrorHandler(async (err, request, reply) => {
    if (err instanceof SignInNeeded)
      return reply.redirect(
        request.method === 'GET' && request.url !== '/'
          ? `/sign-in?back=${encodeURIComponent(request.url)}`
          : '/sign-in',
        303,
      );
    const body = describeError(err) ?? {
      statusCode: 500,
      error: { code: 'INTERNAL', message: `internal error (request ${request.id}); the server log has the details` },
    };
    if (body.statusCode >= 500) request.log.error({ err }, 'console request failed');
    const ctx = context(request, await resolve(request).catch(() => undefined));
    const batchId =
      body.error.code === 'BATCH_NOT_FOUND' ? (request.params as { id?: string } | undefined)?.id : undefined;
    const { message, detail } = errorText(ctx, body, batchId);
    return page(reply, errorPage(ctx, message, body.statusCode >= 500 ? undefined : detail), body.statusCode);
  });
}

/** The style sheet, the script, the icon and the language switch. */
function assetRoutes(scope: FastifyInstance): void {
  scope.get(ASSET_CSS, async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(CSS),
  );
  // The icon browsers ask for on every page (/favicon.ico) and the pages' own <link rel=icon>.
  for (const path of [ASSET_ICON, '/favicon.ico']) {
    scope.get(path, async (_request, reply) =>
      reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(ICON_SVG),
    );
  }
  scope.get(ASSET_JS, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(JS),
  );

  scope.get<{ Querystring: { to?: string; back?: string } }>('/lang', async (request, reply) => {
    const to = LANGS.find((l) => l === request.query.to);
    if (to)
      reply.setCookie(LANG_COOKIE, to, {
        path: '/',
        sameSite: 'lax',
        httpOnly: true,
        maxAge: 365 * 86_400,
        secure: request.protocol === 'https',
      });
    return reply.redirect(localPath(request.query.back), 303);
  });
}

/** The batch list, live updates, one batch, its downloads, its retry. */
function batchRoutes(scope: FastifyInstance, kit: Kit): void {
  const { services, now, redisWait, context, page, required, visibleBatch, visibleArchive, failedOf } = kit;
  scope.get<{ Querystring: Record<string, string | undefined> }>('/', async (request, reply) => {
    const signed = await required(request);
    const ctx = context(request, signed);
    const q = searchOf(request.query.q);
    const { views, lines, search } = await listViews(kit, signed.scope, q);
    const use = await accountUse(services, lines, views, now());
    return page(reply, listPage(ctx, views, lines, flashOf(ctx, request.query), redisWait(), use, search));
  });

  scope.get<{ Params: { id: string }; Querystring: Record<string, string | undefined> }>(
    '/batches/:id',
    async (request, reply) => {
      const signed = await required(request);
      const ctx = context(request, signed);
      const manifest = await visibleArchive(signed, request.params.id);
      if (manifest !== undefined)
        return page(
          reply,
          batchPage(ctx, archivedBatchView(manifest, now()), undefined, RESULT_FORMATS, flashOf(ctx, request.query)),
        );
      const info = await visibleBatch(signed, request.params.id);
      const view = batchView(info, await batchContext(services, info), now());
      const line = await services.accounts.line(info.account).state();
      const failed = await failedOf(view);
      // The outcome bar splits the failed plates by code only with a count of the batch as it is.
      const codes = failed.current !== false ? failed.summary : undefined;
      const charts = batchCharts(
        ctx,
        await batchChartData(services, view, { line, failed: codes, t: ctx.t, at: now() }),
      );
      return page(
        reply,
        batchPage(ctx, view, line, RESULT_FORMATS, flashOf(ctx, request.query), redisWait(), failed, charts),
      );
    },
  );
}

/** The live updates of the batch list and of one batch's page (server-sent events). */
function eventRoutes(scope: FastifyInstance, kit: Kit): void {
  const { services, now, resolve, streams, wakes, sessions, auth, limits, context, visibleBatch, failedOf } = kit;
  scope.get<{ Querystring: { batch?: string; q?: string } }>('/events', async (request, reply) => {
    const signed = await resolve(request);
    if (!signed) throw new ApiError('UNAUTHORIZED', 'sign in first');
    const one = request.query.batch;
    if (one !== undefined) await visibleBatch(signed, one);
    const ctx = context(request, signed);
    // The scope as of the last tick: a token moved to another account sees that account's batches.
    let current = signed.scope;
    // One batch's page: its failed section, read again when its failed count moves, and each tick
    // while the count shown is not of the batch as it is (a large batch is counted in the
    // background: failed-plates.ts; each read here is then one GET).
    let failed: { count: number; current: boolean; html: string; key: string } | undefined;
    const failedNow = async (view: BatchView) => {
      const count = view.counts.failed;
      if (failed === undefined || failed.count !== count || !failed.current) {
        const plates = await failedOf(view);
        failed = {
          count,
          current: plates.current !== false,
          html: failedSection(ctx, view.id, plates).text,
          key: failedKey(plates),
        };
      }
      return { failures: failed.html, failuresKey: failed.key };
    };
    const alive = async () => {
      const session = await sessions.get(signed.session.id);
      if (!session) return false;
      try {
        current = await auth.checkDigest(session.tokenDigest);
        return true;
      } catch {
        return false;
      }
    };
    const spec = {
      name: 'batches',
      owner: idHash(signed.session.id),
      perOwner: limits.streamsPerSession,
      inAll: limits.streamsPerProcess,
      alive,
      wakes,
      idleMs: limits.streamIdleMs,
    };
    await streamEvents(request, reply, streams, {
      ...spec,
      produce: async () => {
        let views: BatchView[];
        let lines: AccountLineState[];
        if (one !== undefined) {
          // A token that no longer sees the batch's account gets nothing of it.
          const info = await visibleBatch({ ...signed, scope: current }, one).catch(() => undefined);
          if (info === undefined) return { data: '[]' };
          views = [batchView(info, await batchContext(services, info), now())];
          lines = [await services.accounts.line(info.account).state()];
          // While its page is open, the batch's charts get a sample a gap (chart-data.ts).
          await sampleBatch(services, views[0]!, lines[0], now());
        } else ({ views, lines } = await listViews(kit, current, searchOf(request.query.q)));
        // The words of why a line waits come from its state (a key failure, an operator, an outage).
        const lineOf = new Map(lines.map((l) => [l.account, l]));
        const sent = [];
        let settled = true;
        for (const v of views) {
          const failures = one !== undefined ? await failedNow(v) : {};
          // Finished, its failed plates counted as they are: only new work changes what is shown.
          settled &&= v.finishedAt !== undefined && (one === undefined || failed?.current !== false);
          sent.push({
            id: v.id,
            percent: v.progress.percent,
            fields: batchFields(v, ctx, lineOf.get(v.account)),
            ...failures,
          });
        }
        const data = JSON.stringify(sent);
        if (!settled) return { data };
        // A finished batch's page: its account's new work (failed plates queued again). The list:
        // any account this token sees (a new batch).
        const shown = views[0]?.account;
        return { data, still: (account: string) => (one !== undefined ? account === shown : canSee(current, account)) };
      },
    });
  });
}

/** The list's search words (`?q=`), trimmed and cut to 100 characters; undefined: none. */
function searchOf(q: unknown): string | undefined {
  const text = typeof q === 'string' ? q.trim().slice(0, 100) : '';
  return text === '' ? undefined : text;
}

/**
 * The batches the list shows to a scope (the newest, or those whose id or name holds `q`, looked
 * for on the server among the newest SEARCHED_BATCHES), and the lines of its accounts.
 */
async function listViews(kit: Kit, s: Scope, q?: string) {
  const { services, now, accountsOf } = kit;
  let batches: BatchInfo[];
  let search: ListSearch | undefined;
  if (q === undefined) ({ batches } = await services.batchViews.list(0, LIST_LIMIT, accountsOf(s)));
  else {
    const found = await services.batches.search(q, LIST_LIMIT, accountsOf(s), SEARCHED_BATCHES);
    batches = await Promise.all(found.refs.map((ref) => services.batchViews.get(ref)));
    search = { q, searched: found.searched, total: found.total };
  }
  const at = now();
  const views = (await batchContexts(services, batches)).map((c, i) => batchView(batches[i]!, c, at));
  const lines = await Promise.all(accountsOf(s).map((id) => services.accounts.line(id).state()));
  return { views, lines, search };
}

/** A batch's downloads (its results in each format, its rejected rows) and vqb's retry of its failed plates. */
function downloadRoutes(scope: FastifyInstance, kit: Kit): void {
  const { services, config, now, archive, langOf, required, checkCsrf, formCsrf, visibleBatch, visibleRef } = kit;
  const { context, page } = kit;
  scope.get<{ Params: { id: string }; Querystring: Record<string, unknown> }>(
    '/batches/:id/results',
    async (request, reply) => {
      const signed = await required(request);
      const batch = await visibleRef(signed, request.params.id);
      const query = ResultsQuery.safeParse(request.query);
      if (!query.success) throw new ApiError('VALIDATION_FAILED', `format: one of ${RESULT_FORMATS.join(', ')}`);
      const results = await batchResults(
        services,
        batch,
        query.data.format,
        config.csvDelimiter,
        request.log,
        archive,
        langOf(request),
      );
      return reply
        .type(results.contentType)
        .header('content-disposition', `attachment; filename="${results.fileName}"`)
        .send(results.body);
    },
  );

  scope.get<{ Params: { id: string } }>('/batches/:id/rejects', async (request, reply) => {
    const signed = await required(request);
    const { id } = request.params;
    const batch = await visibleRef(signed, id);
    const rejects = await batchRejects(services, batch, config.csvDelimiter, request.log, archive, langOf(request));
    return reply
      .type(rejects.contentType)
      .header('content-disposition', `attachment; filename="${rejects.fileName}"`)
      .send(rejects.body);
  });

  scope.post<{ Params: { id: string } }>('/batches/:id/retry', async (request, reply) => {
    const signed = await required(request);
    checkCsrf(signed, formCsrf(request));
    const { id } = request.params;
    const batch = await visibleBatch(signed, id);
    // The button says which failed plates it runs and what that costs; a form without one (a page
    // of an older vqb) runs them as `vqb retry` does.
    const body = request.body as { way?: unknown; confirmed?: unknown } | undefined;
    const way = RETRY_WAYS.find((w) => w === body?.way);
    // A retry that buys new queries above VQ_CONFIRM_ABOVE is not one click: a page states the
    // price first, and only its button (confirmed = the count it stated) sends anything.
    if (way !== 'poll') {
      const summary = await failedSummary(services.outcomes, { id: batch.id, account: batch.account });
      const asked = askAboveThreshold(config, summary.ask, services.accounts.for(batch.account).account.price);
      if (asked !== undefined && body?.confirmed !== String(summary.ask))
        return page(reply, confirmRetryPage(context(request, signed), id, summary.ask, asked));
    }
    const result = await rerunFailed(services, batch, { now, ...(way ? { only: way } : {}) });
    await kit.failedPlates.forget(batch);
    request.log.info({ batchId: id, ...result, via: 'console' }, 'failed plates queued again');
    return reply.redirect(
      `/batches/${encodeURIComponent(id)}?` +
        `retried=${result.retried}&recreated=${result.recreated}&skipped=${result.skipped}`,
      303,
    );
  });
}

/** Pause and resume an account's line. */
function accountRoutes(scope: FastifyInstance, kit: Kit): void {
  const { services, required, checkCsrf, formCsrf, accountsOf } = kit;
  scope.post<{ Params: { account: string; action: string }; Querystring: { back?: string } }>(
    '/accounts/:account/:action',
    async (request, reply) => {
      const signed = await required(request);
      checkCsrf(signed, formCsrf(request));
      const { account, action } = request.params;
      if (!accountsOf(signed.scope).includes(account) || (action !== 'pause' && action !== 'resume'))
        throw new ApiError('NOT_FOUND', `no account ${account}`);
      const line = services.accounts.line(account);
      if (action === 'pause') await line.pauseByOperator(CONSOLE_PAUSE_REASON);
      else {
        await line.releaseHold();
        await services.webhooks.accountResumed(account, await line.resume());
      }
      request.log.info(
        { account, via: 'console' },
        action === 'pause' ? 'account paused by an operator' : 'account resumed by an operator',
      );
      const back = new URL(localPath(request.query.back), 'http://console.invalid');
      for (const k of ['paused', 'resumed', 'retried', 'recreated', 'skipped']) back.searchParams.delete(k);
      back.searchParams.set(action === 'pause' ? 'paused' : 'resumed', account);
      return reply.redirect(`${back.pathname}${back.search}`, 303);
    },
  );
}

/**
 * Reads an uploaded file (the API's own reader: CSV or XLSX, the CSRF token checked before the file
 * is read), prices it with the enqueue module's dry run and stages it for the operator to confirm.
 * Returns the staged upload's id.
 */
async function stageUpload(
  kit: Kit,
  request: FastifyRequest,
  signed: Signed,
  accounts: readonly string[],
  seen: UploadValues,
): Promise<string> {
  const { services, config, uploads, checkCsrf } = kit;
  // A session (or server) already at its cap is refused before its file is read.
  await uploads.checkRoom(idHash(signed.session.id));
  // The API's own reader of an uploaded file: what it reads (CSV; XLSX once it does), the console reads.
  const upload = await readCsvUpload(
    request,
    { bodyLimit: config.http.bodyLimit, maxPlates: config.http.maxPlates },
    { blankFieldsAbsent: true, control: { field: 'csrf', check: (value) => checkCsrf(signed, value) } },
  );
  const { csv, options } = upload;
  const callbackUrl = options.callbackUrl;
  if (callbackUrl !== undefined) seen.callbackUrl = callbackUrl;
  if (options.deadline !== undefined) seen.deadline = options.deadline;
  if (options.column !== undefined) seen.column = options.column;
  if (options.sheet !== undefined) seen.sheet = options.sheet;
  // Read at upload: `18:00` means the one after this upload, whenever it is confirmed.
  const deadline = parseDeadline({ deadline: options.deadline }, clock.now(), config.timeZone);
  // A pool: the session's only when every key of it is (else as if absent); its home is the account.
  const pool = options.pool !== undefined ? poolsOf(config, accounts).find((p) => p === options.pool) : undefined;
  if (options.pool !== undefined && pool === undefined)
    throw new ApiError('POOL_NOT_FOUND', `no pool ${JSON.stringify(options.pool)} for this token`);
  // The request's own rules (its pool's home key, its callback URL) are enqueue's, as at every door.
  const checked = checkRequest(config, {
    ...(pool !== undefined ? { pool } : {}),
    ...(options.account !== undefined ? { account: options.account } : {}),
    ...(callbackUrl !== undefined ? { callbackUrl } : {}),
  });
  const account = checked.account ?? accounts[0];
  if (account === undefined || !accounts.includes(account))
    throw new ApiError('ACCOUNT_NOT_FOUND', `no account ${JSON.stringify(options.account ?? '')} for this token`);
  const name = options.name ?? upload.fileName?.slice(0, 100) ?? 'console';
  const force = options.force === true;
  const reuse = options.reuseWithinMs !== undefined ? { reuseWithinMs: options.reuseWithinMs } : {};
  const input: EnqueueInput = {
    source: 'console',
    name,
    digest: csv.digest,
    rows: csv.rows,
    extraColumns: csv.header.extraColumns,
  };
  // A cap in money (maxSpend) is a cap in creates at the account's price, as the API's.
  const maxCreates = createsCap(options, services.accounts.for(account).account.price, account);
  const batchOptions: BatchRequest = {
    account,
    ...(pool !== undefined ? { pool } : {}),
    force,
    ...reuse,
    ...(maxCreates !== undefined ? { maxCreates } : {}),
    ...(callbackUrl !== undefined ? { callbackUrl } : {}),
    ...(deadline !== undefined ? { deadline } : {}),
  };
  // The estimate refuses a callback URL this server will not call, as the confirm would: nothing is staged.
  const estimated = await estimate(services, input, batchOptions);
  const batchId = estimated.batchId;
  const staged = await uploads.put({
    owner: idHash(signed.session.id),
    batchId,
    name,
    digest: csv.digest,
    account,
    ...(pool !== undefined ? { pool } : {}),
    extraColumns: [...csv.header.extraColumns],
    force,
    ...reuse,
    ...(maxCreates !== undefined ? { maxCreates } : {}),
    ...(options.priority !== undefined ? { priority: options.priority } : {}),
    ...(options.weight !== undefined ? { weight: options.weight } : {}),
    ...(deadline !== undefined ? { deadline } : {}),
    ...(checked.callbackUrl !== undefined ? { callbackUrl: checked.callbackUrl } : {}),
    estimate: estimated,
    rows: csv.rows,
  });
  request.log.info(
    { batchId, rows: estimated.rows, creates: estimated.creates, via: 'console' },
    'upload staged for confirmation',
  );
  return staged;
}

/** The pools of keys whose every key is among `accounts` (a session sees a pool only whole). */
function poolsOf(config: Pick<Config, 'accounts'>, accounts: readonly string[]): string[] {
  const pools = [...new Set(config.accounts.flatMap((a) => (a.pool !== undefined ? [a.pool] : [])))];
  return pools.filter((p) => config.accounts.every((a) => a.pool !== p || accounts.includes(a.id)));
}

/** Upload a file, see its estimate, confirm it. */
function uploadRoutes(scope: FastifyInstance, kit: Kit): void {
  const { services, uploads, context, page, required, checkCsrf, formCsrf, accountsOf } = kit;
  scope.get('/upload', async (request, reply) => {
    const signed = await required(request);
    const accounts = accountsOf(signed.scope);
    return page(reply, uploadPage(context(request, signed), accounts, undefined, {}, poolsOf(kit.config, accounts)));
  });

  scope.post(
    '/upload',
    {
      // Signed in, before the body is read; the CSRF token is the form's first field (never in the
      // URL, where request logs and proxies would keep it), checked before the file is read.
      onRequest: async (request) => {
        await required(request);
      },
    },
    async (request, reply) => {
      const signed = await required(request);
      const ctx = context(request, signed);
      const accounts = accountsOf(signed.scope);
      let staged: string;
      // What the form said, for the page that shows a refusal with the operator's input kept.
      const seen: UploadValues = {};
      try {
        staged = await stageUpload(kit, request, signed, accounts, seen);
      } catch (err) {
        const body = describeError(err);
        if (!body || body.statusCode >= 500 || body.error.code === 'CSRF') throw err;
        const code = body.error.code;
        // Refused before the file was read (no room): close rather than read the rest of it.
        if (!request.raw.complete) reply.header('connection', 'close');
        const message = CALLBACK_REFUSALS.has(code) ? ctx.t(`callback.${code}` as Key) : errorText(ctx, body).message;
        closeIfBodyPending(request, reply);
        return page(reply, uploadPage(ctx, accounts, message, seen, poolsOf(kit.config, accounts)), body.statusCode);
      }
      return reply.redirect(`/upload/${staged}`, 303);
    },
  );

  scope.get<{ Params: { stage: string } }>('/upload/:stage', async (request, reply) => {
    const signed = await required(request);
    const ctx = context(request, signed);
    const upload = await uploads.get(request.params.stage, idHash(signed.session.id));
    if (!upload) return page(reply, uploadPage(ctx, accountsOf(signed.scope), ctx.t('estimate.gone')), 404);
    return page(
      reply,
      estimatePage(ctx, request.params.stage, upload.name, upload.account, upload.estimate, upload.callbackUrl),
    );
  });

  scope.post<{ Params: { stage: string } }>('/upload/:stage/confirm', async (request, reply) => {
    const signed = await required(request);
    checkCsrf(signed, formCsrf(request));
    const ctx = context(request, signed);
    const upload = await uploads.get(request.params.stage, idHash(signed.session.id));
    // Taken once: a double click confirms one batch.
    if (
      !upload ||
      !accountsOf(signed.scope).includes(upload.account) ||
      !(await uploads.take(request.params.stage, upload))
    ) {
      return page(reply, uploadPage(ctx, accountsOf(signed.scope), ctx.t('estimate.gone')), 404);
    }
    // The staged id (a forced upload's own suffix included) names the batch; the console is its door.
    const { batch, created } = await enqueue(
      services,
      {
        source: 'console',
        name: upload.name,
        digest: upload.digest,
        rows: upload.rows,
        extraColumns: upload.extraColumns,
      },
      {
        batchId: upload.batchId,
        account: upload.account,
        ...(upload.pool !== undefined ? { pool: upload.pool } : {}),
        ...(upload.maxCreates !== undefined ? { maxCreates: upload.maxCreates } : {}),
        ...(upload.reuseWithinMs !== undefined ? { reuseWithinMs: upload.reuseWithinMs } : {}),
        ...(upload.priority !== undefined ? { priority: upload.priority } : {}),
        ...(upload.weight !== undefined ? { weight: upload.weight } : {}),
        ...(upload.deadline !== undefined ? { deadline: upload.deadline } : {}),
        ...(upload.callbackUrl !== undefined ? { callbackUrl: upload.callbackUrl } : {}),
      },
    );
    request.log.info(
      { batchId: batch.id, created, rows: batch.counts.total, enqueued: batch.counts.enqueued, via: 'console' },
      created ? 'batch enqueued' : 'batch already known',
    );
    return reply.redirect(`/batches/${encodeURIComponent(batch.id)}`, 303);
  });
}

function flashOf(ctx: PageContext, query: Record<string, string | undefined>): string | undefined {
  const num = (v: string | undefined) => (v !== undefined && /^\d{1,9}$/.test(v) ? Number(v) : undefined);
  const retried = num(query.retried);
  if (retried !== undefined)
    return plural(ctx, 'flash.retried', retried, {
      recreated: num(query.recreated) ?? 0,
      skipped: num(query.skipped) ?? 0,
    });
  if (query.paused) return ctx.t('flash.paused', { account: query.paused.slice(0, 40) });
  if (query.resumed) return ctx.t('flash.resumed', { account: query.resumed.slice(0, 40) });
  return undefined;
}

/**
 * The price of asking again for `ask` plates when it is above VQ_CONFIRM_ABOVE (money with a price,
 * else queries), as the confirmation states it; undefined when it is not (no question).
 */
function askAboveThreshold(config: Config, ask: number, price: Price | undefined): string | undefined {
  const threshold = config.confirmAboveMicros;
  if (threshold === undefined || ask === 0) return undefined;
  if (price) return ask * price.perQueryMicros > threshold ? formatMoney(costOf(price, ask)) : undefined;
  return ask * 1e6 > threshold ? `${ask} × the price per query (VQ_PRICE_PER_QUERY not set)` : undefined;
}
