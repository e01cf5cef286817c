// Signing in and out of the console. Issue 35: a page elsewhere once signed a browser in as
// another account (login CSRF: the victim's uploads would have gone to it), and tokens could be
// guessed without pause. So a sign-in must come from the console's own form, twice over:
// - its Origin (or, without one, its Referer) is this server's own origin: the scheme and Host the
//   request came with (the proxy's, for a proxy in VQ_HTTP_TRUST_PROXY) or VQ_PUBLIC_URL's. A
//   request with neither header is not a browser's (browsers send Origin with every POST), and
//   the token below decides;
// - it carries the form's pre-session token, equal to the `vqb_signin` cookie the form's page set
//   (HttpOnly, SameSite=Strict, Path=/sign-in: another site can neither read it nor have it sent).
// Anything else is 403 CROSS_SITE, the form again with why, and no session. Failed sign-ins count
// against the client's address (throttle.ts).
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Scope, sha256 } from '../http/auth.js';
import type { Kit } from './kit.js';
import { signInPage } from './pages.js';
import { localPath } from './redirect.js';
import { idHash, SESSION_COOKIE, SESSION_TTL_MS } from './sessions.js';

/** The sign-in form's pre-session cookie: only the sign-in route ever gets it. */
export const SIGN_IN_COOKIE = 'vqb_signin';
const SIGN_IN_PATH = '/sign-in';
const TOKEN_FORM = /^[A-Za-z0-9_-]{43}$/;

interface SignInBody {
  token?: unknown;
  csrf?: unknown;
  back?: unknown;
}

/** Sign in with a service token (a session cookie), sign out. */
export function sessionRoutes(scope: FastifyInstance, kit: Kit): void {
  const { auth, sessions, resolve, context, page, required, checkCsrf, formCsrf, streams, throttle } = kit;
  const publicOrigin = originOf(kit.config.webhooks.publicUrl);

  /** The pre-session token: the browser's own if it has one, else a new one (cookie set). */
  const formToken = (request: FastifyRequest, reply: FastifyReply): string => {
    const had = request.cookies[SIGN_IN_COOKIE];
    if (had !== undefined && TOKEN_FORM.test(had)) return had;
    const token = randomBytes(32).toString('base64url');
    reply.setCookie(SIGN_IN_COOKIE, token, {
      path: SIGN_IN_PATH,
      httpOnly: true,
      sameSite: 'strict',
      secure: request.protocol === 'https',
      maxAge: Math.floor(SESSION_TTL_MS / 1000),
    });
    return token;
  };
  const form = (request: FastifyRequest, reply: FastifyReply, back: string, error?: string, status = 200) =>
    page(reply, signInPage(context(request), { csrf: formToken(request, reply), back }, error), status);

  scope.get<{ Querystring: { back?: string } }>(SIGN_IN_PATH, async (request, reply) => {
    const back = localPath(request.query.back);
    if (await resolve(request)) return reply.redirect(back, 303);
    return form(request, reply, back);
  });

  scope.post<{ Body: SignInBody | undefined; Querystring: { back?: string } }>(SIGN_IN_PATH, async (request, reply) => {
    const body = request.body ?? {};
    const back = localPath(body.back ?? request.query.back);
    const { t } = context(request);
    const waitMs = await throttle.take(request.ip);
    if (waitMs > 0) {
      request.log.info({ code: 'SIGN_IN_THROTTLED' }, 'console sign-in refused');
      const seconds = Math.ceil(waitMs / 1000);
      reply.header('retry-after', String(seconds));
      return form(request, reply, back, t('signIn.throttled', { minutes: Math.ceil(seconds / 60) }), 429);
    }
    const foreign = foreignOrigin(request, publicOrigin);
    const tokenOk = sameToken(request.cookies[SIGN_IN_COOKIE], body.csrf);
    if (foreign !== undefined || !tokenOk) {
      // What was refused and what would have been taken: behind a TLS proxy not in
      // VQ_HTTP_TRUST_PROXY the browser's https origin is not the http one the server sees.
      request.log.info(
        { code: 'CROSS_SITE', origin: foreign, ownOrigins: ownOrigins(request, publicOrigin), formToken: tokenOk },
        'console sign-in refused',
      );
      await throttle.refund(request.ip);
      return form(request, reply, back, t('signIn.crossSite'), 403);
    }
    const token = typeof body.token === 'string' ? body.token.trim() : '';
    let signedScope: Scope;
    try {
      signedScope = await auth.checkDigest(token === '' ? undefined : sha256(token));
    } catch (err) {
      const code = (err as { code?: string }).code;
      request.log.info({ code }, 'console sign-in refused');
      if (code === 'AUTH_NOT_CONFIGURED') {
        await throttle.refund(request.ip);
        return form(request, reply, back, t('signIn.notConfigured'), 503);
      }
      return form(request, reply, back, t('signIn.invalid'), 401);
    }
    await throttle.refund(request.ip);
    const session = await sessions.create(sha256(token));
    request.log.info(
      { admin: signedScope.admin, accounts: signedScope.admin ? undefined : signedScope.accounts },
      'console signed in',
    );
    reply.setCookie(SESSION_COOKIE, session.id, {
      path: '/',
      httpOnly: true,
      sameSite: 'strict',
      secure: request.protocol === 'https',
      maxAge: Math.floor(SESSION_TTL_MS / 1000),
    });
    return reply.redirect(back, 303);
  });

  scope.post('/sign-out', async (request, reply) => {
    const signed = await required(request);
    checkCsrf(signed, formCsrf(request));
    await sessions.delete(signed.session.id);
    // This process's live streams of the session end now; another process's at their next tick.
    streams.endOwner(idHash(signed.session.id));
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    request.log.info('console signed out');
    return reply.redirect('/sign-in', 303);
  });
}

function originOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/**
 * The origins a sign-in may come from: the one the request was sent to (scheme and Host, as a
 * trusted proxy says them) and the public one.
 */
function ownOrigins(request: FastifyRequest, publicOrigin: string | undefined): string[] {
  const own = originOf(`${request.protocol}://${request.host}`);
  return [own, publicOrigin].filter((o): o is string => o !== undefined);
}

/**
 * The other origin the request says it came from, or undefined: its Origin, or its Referer when it
 * has no Origin, is not one of ownOrigins. `Origin: null` (a sandboxed frame, a redirect across
 * sites) is another origin. Neither header: not a browser's request; the pre-session token decides.
 */
export function foreignOrigin(request: FastifyRequest, publicOrigin: string | undefined): string | undefined {
  const { origin, referer } = request.headers;
  const said = typeof origin === 'string' ? origin : typeof referer === 'string' ? referer : undefined;
  if (said === undefined) return undefined;
  const from = originOf(said) ?? 'null';
  return ownOrigins(request, publicOrigin).includes(from) ? undefined : from.slice(0, 200);
}

/** The form's token equals its cookie (compared in constant time). */
function sameToken(cookie: string | undefined, sent: unknown): boolean {
  if (cookie === undefined || typeof sent !== 'string' || !TOKEN_FORM.test(cookie) || !TOKEN_FORM.test(sent))
    return false;
  return timingSafeEqual(Buffer.from(cookie), Buffer.from(sent));
}
