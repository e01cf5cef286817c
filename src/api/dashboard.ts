// Bull Board, the queue dashboard, mounted in the API server at /admin/queues: one queue per
// account, read-only (its retry and clean bypass vqb's records: a retried plate must go through
// `vqb retry` or the console's retry), behind the same service-token check as the API or the
// console's session (`guard`), with no link to another site (its page's Google Fonts are cut). Bull Board answers its
// own errors in its own shape; they are rewritten into ours on the way out, as every other error
// of the API is, and a failure inside it is logged, its details not sent.
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { codeForStatus, type ErrorBody, errorBody, errorCodeOf, errorPayload } from '../http/errors.js';
import type { PlateQueue } from '../queue/account-queues.js';

export const DASHBOARD_PATH = '/admin/queues';

/** Only our own origin; Bull Board's React sets inline styles. */
export const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'";

/** The page without `<link>`s to other origins (Bull Board's Google Fonts stylesheet). */
export function withoutForeignLinks(page: string): string {
  return page.replace(/<link\b[^>]*\bhref="(?:https?:)?\/\/[^"]*"[^>]*>\s*/gi, '');
}

export async function mountDashboard(
  app: FastifyInstance,
  queues: readonly PlateQueue[],
  guard: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: true })),
    serverAdapter,
    options: {
      uiConfig: {
        boardTitle: 'vqb',
        // A way back to the console, vqb's icon, and no link to another site (Bull Board's docs).
        miscLinks: [{ text: 'Console', url: '/' }],
        favIcon: { default: '/favicon.ico', alternative: '/favicon.ico' },
        hideDocsLink: true,
      },
    },
  });
  await app.register(
    async (scope) => {
      scope.addHook('onRequest', guard);
      scope.addHook('onSend', async (request, reply, payload) => {
        reply.header('content-security-policy', DASHBOARD_CSP);
        reply.header('x-frame-options', 'DENY');
        // Bull Board's page links fonts from Google: the browser would tell a third party who opens
        // the dashboard, and when. Without them it falls back to the system's sans-serif.
        if (typeof payload === 'string' && String(reply.getHeader('content-type') ?? '').startsWith('text/html'))
          return withoutForeignLinks(payload);
        // Our own answers (the guard's, not-found) are marked already.
        if (reply.statusCode < 400 || errorCodeOf(request) !== undefined) return payload;
        const body = dashboardError(reply.statusCode, payload);
        if (body.statusCode >= 500)
          request.log.error(
            {
              statusCode: reply.statusCode,
              dashboard: typeof payload === 'string' ? payload.slice(0, 2_000) : undefined,
            },
            'dashboard request failed',
          );
        return errorPayload(
          request,
          reply,
          body.statusCode >= 500
            ? errorBody(
                body.statusCode,
                'INTERNAL',
                `internal error (request ${request.id}); the server log has the details`,
              )
            : body,
        );
      });
      await scope.register(serverAdapter.registerPlugin());
    },
    { prefix: DASHBOARD_PATH },
  );
}

/** Bull Board's error answer (`{error: {key: 'ERRORS.QUEUE_READ_ONLY'}, message?}`) in our shape. */
export function dashboardError(statusCode: number, payload: unknown): ErrorBody {
  let parsed: { error?: { key?: unknown; options?: { field?: unknown } } | string; message?: unknown } | undefined;
  try {
    parsed = typeof payload === 'string' ? (JSON.parse(payload) as typeof parsed) : undefined;
  } catch {
    parsed = undefined;
  }
  const key = typeof parsed?.error === 'object' && typeof parsed.error.key === 'string' ? parsed.error.key : undefined;
  const named =
    key !== undefined && /^ERRORS\.[A-Z][A-Z0-9_]{0,60}$/.test(key) ? key.slice('ERRORS.'.length) : undefined;
  const code =
    named !== undefined && named !== 'INTERNAL_SERVER_ERROR' ? named : (codeForStatus(statusCode) ?? 'DASHBOARD_ERROR');
  const field =
    typeof parsed?.error === 'object' && typeof parsed.error.options?.field === 'string'
      ? ` ${parsed.error.options.field.slice(0, 100)}`
      : '';
  const detail = typeof parsed?.message === 'string' && parsed.message.length <= 200 ? `: ${parsed.message}` : '';
  return errorBody(
    statusCode,
    code,
    `the queue dashboard refused the request (${code.toLowerCase().replaceAll('_', ' ')}${field})${detail}`,
  );
}
