// What every route group of the console shares: the stores, the signed-in session, the page helpers.
import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RedisWaitReason } from '../accounts/wait.js';
import type { Config } from '../config.js';
import { canSee, type Scope, type TokenAuth } from '../http/auth.js';
import { batchAccess } from '../http/batch-access.js';
import { ApiError } from '../http/errors.js';
import type { BatchView } from '../schemas/batch.js';
import type { QueueServices } from '../services.js';
import type { archiveFor } from '../sinks/export.js';
import type { OpenStreams } from './events.js';
import type { FailedPlates as FailedStore } from './failed-plates.js';
import { LANG_COOKIE, type Lang, pickLang, translator } from './i18n.js';
import type { ConsoleLimits } from './limits.js';
import type { FailedPlates, PageContext } from './pages.js';
import type { Session, SessionStore } from './sessions.js';
import type { SignInThrottle } from './throttle.js';
import type { StagedUploads } from './uploads.js';
import type { WakeNews } from './wake-news.js';

export interface Signed {
  session: Session;
  scope: Scope;
}

export interface KitBase {
  services: QueueServices;
  config: Config;
  auth: TokenAuth;
  now: () => number;
  redisWait: () => RedisWaitReason | undefined;
  archive: ReturnType<typeof archiveFor>;
  sessions: SessionStore;
  uploads: StagedUploads;
  resolve: (request: FastifyRequest) => Promise<Signed | undefined>;
  streams: OpenStreams;
  /** New work heard, for live pages that show only finished batches. */
  wakes: WakeNews;
  limits: ConsoleLimits;
  throttle: SignInThrottle;
  failedPlates: FailedStore;
}

/** What every route group of the console uses: the stores, the session, the page helpers. */
export function consoleKit(base: KitBase) {
  const { services, config, archive, resolve } = base;
  const langOf = (request: FastifyRequest): Lang =>
    pickLang(request.cookies[LANG_COOKIE], request.headers['accept-language']);
  const context = (request: FastifyRequest, signed?: Signed): PageContext => {
    const lang = langOf(request);
    return {
      lang,
      t: translator(lang),
      zone: config.timeZone,
      path: request.url,
      ...(signed ? { session: { csrf: signed.session.csrf, admin: signed.scope.admin } } : {}),
    };
  };
  const page = (reply: FastifyReply, body: string, status = 200) =>
    reply.code(status).type('text/html; charset=utf-8').send(body);
  const required = async (request: FastifyRequest): Promise<Signed> => {
    const signed = await resolve(request);
    if (!signed) throw new SignInNeeded();
    return signed;
  };
  const checkCsrf = (signed: Signed, sent: unknown) => {
    const expected = Buffer.from(signed.session.csrf);
    const got = Buffer.from(typeof sent === 'string' ? sent : '');
    if (got.length !== expected.length || !timingSafeEqual(got, expected))
      throw new ApiError('CSRF', translator('en')('error.csrf'));
  };
  const formCsrf = (request: FastifyRequest) => (request.body as { csrf?: unknown } | undefined)?.csrf;
  const access = batchAccess(services, archive);
  const visibleBatch = (signed: Signed, id: string) => access.batch(signed.scope, id);
  /** The manifest of an archived batch this session may see; undefined while the batch is in Redis. */
  const visibleArchive = (signed: Signed, id: string) => access.archived(signed.scope, id);
  const visibleRef = (signed: Signed, id: string) => access.ref(signed.scope, id);
  const accountsOf = (s: Scope): string[] => config.accounts.map((a) => a.id).filter((id) => canSee(s, id));
  /**
   * The batch's failed plates as last counted (failed-plates.ts: one read when nothing moved, never
   * a read of every outcome during a large batch's page load) and its account's price.
   */
  const failedOf = async (
    info: Pick<BatchView, 'id' | 'account' | 'counts' | 'finished' | 'createdAt'>,
  ): Promise<FailedPlates> => {
    const price = services.accounts.for(info.account).account.price;
    const read = await base.failedPlates.read(info);
    const c = info.counts;
    return { ...read, price, failed: c.failed - (c.cancelled ?? 0) };
  };

  return {
    ...base,
    langOf,
    context,
    page,
    required,
    checkCsrf,
    formCsrf,
    visibleBatch,
    visibleArchive,
    visibleRef,
    accountsOf,
    failedOf,
  };
}

export type Kit = ReturnType<typeof consoleKit>;

/** Thrown by a page that needs a session: the error handler sends the browser to sign in. */
export class SignInNeeded extends Error {}
