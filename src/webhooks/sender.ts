// One delivery attempt: the payload signed as the Standard Webhooks specification says (the
// `standardwebhooks` package's Webhook class, so our signature is the one receivers verify with
// the same package), POSTed with a timeout. The webhook-id is the job's and never changes; the
// timestamp and signature are made anew for each attempt, as the specification allows, so a
// receiver's replay window (5 minutes) does not reject a late retry.
//
// The connection goes only to an address judged at that moment (security issue #35): the agent's
// own `connect.lookup` resolves the name and refuses it when any address is internal, so a name
// that resolved to a public address when the batch was made and to 10.0.0.1 now (DNS rebinding)
// gets no connection at all. IP literals are judged before the request (no lookup happens for
// them). Redirects are not followed. What failed is told as a category, never the socket's words.
import type { LookupAddress, LookupOptions } from 'node:dns';
import { Webhook } from 'standardwebhooks';
import { Agent, type Dispatcher, request } from 'undici';
import { clock } from '../clock.js';
import type { Secret } from '../setting-values.js';
import { forbiddenAddress, type Resolve, systemResolve } from './address.js';
import type { DeliveryFailure } from './deliveries.js';
import type { WebhookJobData } from './outbox.js';
import { forbiddenHost, hostNamedExactly } from './target.js';

export interface SendResult {
  /** The receiver answered 2xx. */
  ok: boolean;
  /** The HTTP status, when the receiver answered. */
  status?: number;
  /** Why the attempt failed, when it did: what the delivery status shows. */
  failure?: DeliveryFailure;
  /** The error's own words, for the operator's debug log only (never stored, never shown to a tenant). */
  detail?: string;
}

export interface SenderOptions {
  secret: Secret;
  timeoutMs: number;
  /** VQ_WEBHOOK_ALLOW: a host named exactly there may be internal (target.ts). */
  allow: readonly string[];
  /** Name resolution at connect time (default dns.lookup); injected in tests. */
  resolve?: Resolve;
  now?: () => number;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** Thrown from the agent's lookup: the name resolved to an internal address; nothing connected. */
class AddressRefused extends Error {
  readonly code = 'CALLBACK_ADDRESS_FORBIDDEN';
}

/** net.connect's `lookup`, through `resolve`, refusing a name with any internal address unless `open`. */
export function guardedLookup(resolve: Resolve, open: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolve(hostname).then(
      (all) => {
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
        const answers = family === 4 || family === 6 ? all.filter((a) => a.family === family) : all;
        const bad = open ? undefined : answers.find((a) => forbiddenAddress(a.address) !== undefined);
        if (bad !== undefined) return callback(new AddressRefused(`${hostname}: refused address`), '');
        const first = answers[0];
        if (first === undefined)
          return callback(Object.assign(new Error(`${hostname}: no address`), { code: 'ENOTFOUND' }), '');
        if (options.all) callback(null, answers);
        else callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };
}

/** The category of a request's error. */
function failureOf(e: { name?: string; code?: string }): DeliveryFailure {
  const code = e.code ?? '';
  if (code === 'CALLBACK_ADDRESS_FORBIDDEN') return 'refused_address';
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || /^UND_ERR_(HEADERS|BODY|CONNECT)_TIMEOUT$/.test(code))
    return 'timeout';
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code)) return 'tls';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'ENODATA') return 'dns_failed';
  if (/^(ECONN|EHOST|ENET|EPIPE|ETIMEDOUT|UND_ERR_SOCKET|UND_ERR_CLOSED)/.test(code)) return 'connect_failed';
  return 'failed';
}

function failureOfStatus(status: number): DeliveryFailure {
  if (status === 410) return 'gone';
  if (status >= 400 && status < 500) return 'http_4xx';
  if (status >= 500 && status < 600) return 'http_5xx';
  return 'http_other';
}

export class WebhookSender {
  readonly #webhook: Webhook;
  readonly #o: SenderOptions;
  readonly #now: () => number;
  /** Every delivery to a host not named exactly on the allow-list: internal addresses refused. */
  readonly #guarded: Dispatcher;
  /** Deliveries to a host the allow-list names exactly (the operator's own receiver). */
  readonly #named: Dispatcher;

  constructor(options: SenderOptions) {
    this.#webhook = new Webhook(options.secret.reveal());
    this.#o = options;
    this.#now = options.now ?? clock.now;
    const resolve = options.resolve ?? systemResolve;
    // HTTP/1.1, as tested (undici 8 would otherwise speak HTTP/2 to receivers that offer it).
    this.#guarded = new Agent({ allowH2: false, connect: { lookup: guardedLookup(resolve, false) } });
    this.#named = new Agent({ allowH2: false, connect: { lookup: guardedLookup(resolve, true) } });
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
    const { timeoutMs, allow } = this.#o;
    const url = new URL(data.url);
    // A literal address connects without a lookup: judged here (a URL stored before this check existed too).
    const why = forbiddenHost(url, allow);
    if (why !== undefined) return { ok: false, failure: 'refused_address', detail: why };
    try {
      const response = await request(url, {
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
        dispatcher: hostNamedExactly(url.host, allow) ? this.#named : this.#guarded,
      });
      // The answer's body means nothing to us: drop it (bounded), free the connection.
      await response.body.dump({ limit: 64 * 1024 }).catch(() => {});
      const status = response.statusCode;
      if (status >= 200 && status < 300) return { ok: true, status };
      return { ok: false, status, failure: failureOfStatus(status) };
    } catch (err) {
      const e = err as { name?: string; code?: string; message?: string };
      return { ok: false, failure: failureOf(e), detail: `${e.code ?? e.name ?? 'error'}: ${e.message ?? ''}` };
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.#guarded.close(), this.#named.close()]);
  }
}
