// Bull Board, the queue dashboard, mounted in the API server at /admin/queues: one queue per
// account, read-only (its retry and clean bypass vqb's records: a retried plate must go through
// `vqb retry` or the console's retry), behind the same service-token check as the API or the
// console's session (`guard`), with no link to another site (its page's Google Fonts are cut). Bull Board answers its
// own errors in its own shape; they are rewritten into ours on the way out, as every other error
// of the API is, and a failure inside it is logged, its details not sent.
//
// Its workers (issue 36, 13): Bull Board finds a queue's workers in Redis's CLIENT LIST, by the
// connection name BullMQ gives each Worker's blocking connection. vqb's Workers have none of their
// own (they share their process's connection through a backend, README "Stack"), so the board said
// "No workers" beside 8 active jobs. It now lists vqb's worker processes as their heartbeat records
// them (queue/presence.ts), and each queue's description says what that list is.
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import type { QueueWorker } from '@bull-board/api/dist/types.js';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { codeForStatus, type ErrorBody, errorBody, errorCodeOf, errorPayload } from '../http/errors.js';
import type { PlateQueue } from '../queue/account-queues.js';
import type { WorkerProcess } from '../queue/presence.js';

export const DASHBOARD_PATH = '/admin/queues';

/** What the workers list of every queue is, in its description (the queue's info panel). */
export const WORKERS_DESCRIPTION =
  "Workers: vqb's worker processes (vqb work, vqb serve --workers, vqb run) heard from in the last 30 s, " +
  "as their heartbeat says. Each runs this account's BullMQ Worker while the account has work, on the " +
  "process's one connection shared by every account, which Redis's CLIENT LIST cannot tell apart by queue: " +
  'every process is listed under every queue.';

/** Bull Board's BullMQ adapter with vqb's worker processes as the queue's workers (see above). */
export class VqbQueueAdapter extends BullMQAdapter {
  readonly #workers: () => Promise<readonly WorkerProcess[]>;
  readonly #now: () => number;

  constructor(queue: PlateQueue, workers: () => Promise<readonly WorkerProcess[]>, now: () => number) {
    super(queue, { readOnlyMode: true, description: WORKERS_DESCRIPTION });
    this.#workers = workers;
    this.#now = now;
  }

  override async getWorkers(): Promise<QueueWorker[] | null> {
    const now = this.#now();
    return (await this.#workers()).map((w) => ({
      id: w.name,
      name: w.name,
      addr: w.name.slice(0, w.name.lastIndexOf(':')),
      // Seconds since the process started ("connected … ago"); unknown for an older vqb's entry.
      age: Math.max(0, Math.round((now - (w.startedAt ?? w.lastBeatAt)) / 1000)),
    }));
  }
}

/** A visible way back to the console on the dashboard's page (Bull Board's own link hides in a menu). */
export const CONSOLE_LINK =
  '<a href="/" data-vqb-console style="position:fixed;right:.75rem;bottom:.75rem;z-index:2147483647;' +
  'padding:.4rem .8rem;border-radius:4px;background:#0b5fce;color:#fff;font:600 14px/1.4 system-ui,sans-serif;' +
  'text-decoration:none">← vqb console</a>';

/** The page with the console link first in the body (first in the keyboard's order too). */
export function withConsoleLink(page: string): string {
  return page.replace(/<body\b[^>]*>/i, (body) => `${body}\n${CONSOLE_LINK}`);
}

/** Only our own origin; Bull Board's React sets inline styles. */
export const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'";

/** The page without `<link>`s to other origins (Bull Board's Google Fonts stylesheet). */
export function withoutForeignLinks(page: string): string {
  return page.replace(/<link\b[^>]*\bhref="(?:https?:)?\/\/[^"]*"[^>]*>\s*/gi, '');
}

export async function mountDashboard(
  app: FastifyInstance,
  queues: readonly PlateQueue[],
  workers: { list: () => Promise<readonly WorkerProcess[]>; now: () => number },
  guard: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  createBullBoard({
    queues: queues.map((q) => new VqbQueueAdapter(q, workers.list, workers.now)),
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
          return withConsoleLink(withoutForeignLinks(payload));
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
