// One delivery attempt: the payload signed as the Standard Webhooks specification says (the
// `standardwebhooks` package's Webhook class, so our signature is the one receivers verify with
// the same package), POSTed with a timeout. The webhook-id is the job's and never changes; the
// timestamp and signature are made anew for each attempt, as the specification allows, so a
// receiver's replay window (5 minutes) does not reject a late retry.
import { Webhook } from 'standardwebhooks';
import { type Dispatcher, request } from 'undici';
import type { Secret } from '../../config.js';
import type { WebhookJobData } from './outbox.js';

export interface SendResult {
  /** The receiver answered 2xx. */
  ok: boolean;
  /** The HTTP status, when the receiver answered. */
  status?: number;
  /** Why the attempt failed, in words, when it did. */
  error?: string;
}

export interface SenderOptions {
  secret: Secret;
  timeoutMs: number;
  dispatcher?: Dispatcher;
  now?: () => number;
}

export class WebhookSender {
  readonly #webhook: Webhook;
  readonly #o: SenderOptions;
  readonly #now: () => number;

  constructor(options: SenderOptions) {
    this.#webhook = new Webhook(options.secret.reveal());
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /** The three headers of the specification for this attempt. */
  sign(id: string, body: string, at: number): Record<string, string> {
    return {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at / 1000)),
      'webhook-signature': this.#webhook.sign(id, new Date(at), body),
    };
  }

  async send(data: WebhookJobData): Promise<SendResult> {
    const { timeoutMs } = this.#o;
    try {
      const response = await request(data.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'vqb-webhooks',
          ...this.sign(data.id, data.body, this.#now()),
        },
        body: data.body,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
        ...(this.#o.dispatcher ? { dispatcher: this.#o.dispatcher } : {}),
      });
      // The answer's body means nothing to us: drop it (bounded), free the connection.
      await response.body.dump({ limit: 64 * 1024 }).catch(() => {});
      const status = response.statusCode;
      if (status >= 200 && status < 300) return { ok: true, status };
      return { ok: false, status, error: `the receiver answered ${status}` };
    } catch (err) {
      const e = err as { name?: string; code?: string; message?: string };
      if (
        e.name === 'TimeoutError' ||
        e.name === 'AbortError' ||
        e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
        e.code === 'UND_ERR_BODY_TIMEOUT'
      ) {
        return { ok: false, error: `no answer within ${timeoutMs} ms (VQ_WEBHOOK_TIMEOUT)` };
      }
      return {
        ok: false,
        error: `could not reach the receiver: ${e.code ?? e.name ?? 'error'}${e.message ? ` (${e.message})` : ''}`,
      };
    }
  }
}
