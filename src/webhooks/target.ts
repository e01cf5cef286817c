// Where a webhook may go: an http(s) URL, without credentials in it, to a host the allow-list
// (VQ_WEBHOOK_ALLOW) names, and only when a signing secret is configured. Checked when a batch is
// made (nothing is stored when the URL is refused) and again before each delivery, so a host
// taken off the list gets nothing more.
//
// Never to an internal address (address.ts): an IP literal or an internal name is refused at once
// (`checkCallbackUrl`, synchronous, every front door), a name is resolved and every address it
// resolves to judged before the batch is stored (`checkCallbackTarget`, in ingest), and the
// connection of each delivery goes only to an address judged again then (sender.ts). The one
// exception: a host the allow-list names exactly (`127.0.0.1`, `hooks.corp:8443`, not `*.corp`)
// is the operator's own receiver and may be internal; a wildcard never opens an internal range.

import { clock } from '../clock.js';
import { InputError } from '../errors.js';
import type { Secret } from '../setting-values.js';
import { forbiddenAddress, forbiddenName, ipLiteral, type Resolve } from './address.js';

/** The URL is not one vqb sends to (not http(s), malformed, credentials in it). */
/** The webhook settings (VQ_WEBHOOK_*), parsed once with the rest of the config. */
export interface WebhookSettings {
  /** The signing secret (`whsec_…`); without one no callbackUrl is accepted. */
  secret: Secret | undefined;
  /** Hosts deliveries may go to (`*.example.com` covers its subdomains); empty = any. */
  allow: readonly string[];
  /** Receives account-level events of every account. */
  url: string | undefined;
  attempts: number;
  backoffMs: number;
  timeoutMs: number;
  /** Base of absolute links in payloads (no trailing slash); unset = links are paths. */
  publicUrl: string | undefined;
  /** callbackUrl of the drop folder's batches. */
  inboxNotifyUrl: string | undefined;
}

export const CALLBACK_URL_INVALID = 'CALLBACK_URL_INVALID';
/** The URL's host is not on VQ_WEBHOOK_ALLOW. */
export const CALLBACK_HOST_NOT_ALLOWED = 'CALLBACK_HOST_NOT_ALLOWED';
/** The URL's host is, or resolves to, an address webhooks never go to (loopback, private, metadata…). */
export const CALLBACK_ADDRESS_FORBIDDEN = 'CALLBACK_ADDRESS_FORBIDDEN';
/** The URL's host name does not resolve (no address to judge, none to send to). */
export const CALLBACK_HOST_UNRESOLVED = 'CALLBACK_HOST_UNRESOLVED';
/** No VQ_WEBHOOK_SECRET: an unsigned webhook could be forged by anyone, so none is sent. */
export const WEBHOOK_SECRET_MISSING = 'WEBHOOK_SECRET_MISSING';

/** True when `host` (lower case, with `:port` when the URL has one) is on the list; an empty list allows any. */
export function hostAllowed(host: string, allow: readonly string[]): boolean {
  if (allow.length === 0) return true;
  const name = host.toLowerCase();
  const bare = name.replace(/:\d+$/, '');
  return allow.some((entry) => {
    if (entry.startsWith('*.')) return bare.endsWith(entry.slice(1)) && bare.length > entry.length - 1;
    return entry === name || entry === bare;
  });
}

/**
 * True when an allow-list entry names this host exactly (not a wildcard), with its port or without
 * one: the operator's own receiver, which may be on an internal address.
 */
export function hostNamedExactly(host: string, allow: readonly string[]): boolean {
  const name = host.toLowerCase();
  const bare = name.replace(/:\d+$/, '');
  return allow.some((entry) => !entry.startsWith('*.') && (entry === name || entry === bare));
}

/** Why this URL's host is refused before any lookup (an internal IP literal or name), or undefined. */
export function forbiddenHost(url: URL, allow: readonly string[]): string | undefined {
  if (hostNamedExactly(url.host, allow)) return undefined;
  const literal = ipLiteral(url.hostname);
  return literal !== undefined ? forbiddenAddress(literal) : forbiddenName(url.hostname);
}

const refused = (host: string, why: string) =>
  new InputError(
    CALLBACK_ADDRESS_FORBIDDEN,
    `callbackUrl: host ${host} is ${why}; webhooks go to public addresses only (an internal ` +
      `receiver must be named exactly on VQ_WEBHOOK_ALLOW by the operator)`,
  );

/**
 * The URL as it will be stored and called; throws InputError with one of the codes above. Judges
 * what it can without a lookup; `checkCallbackTarget` also resolves the name.
 */
export function checkCallbackUrl(raw: string, settings: Pick<WebhookSettings, 'allow' | 'secret'>): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InputError(
      CALLBACK_URL_INVALID,
      `callbackUrl: expected an absolute http:// or https:// URL; got ${JSON.stringify(raw.slice(0, 200))}`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InputError(
      CALLBACK_URL_INVALID,
      `callbackUrl: only http:// and https:// URLs are called; got ${url.protocol}`,
    );
  }
  if (url.username !== '' || url.password !== '') {
    throw new InputError(
      CALLBACK_URL_INVALID,
      'callbackUrl: no user name or password in the URL (deliveries are signed instead; see VQ_WEBHOOK_SECRET)',
    );
  }
  if (raw.length > 2_048) throw new InputError(CALLBACK_URL_INVALID, 'callbackUrl: at most 2048 characters');
  if (!hostAllowed(url.host, settings.allow)) {
    throw new InputError(
      CALLBACK_HOST_NOT_ALLOWED,
      `callbackUrl: host ${url.host} is not on this server's webhook allow-list (VQ_WEBHOOK_ALLOW)`,
    );
  }
  if (settings.secret === undefined) {
    throw new InputError(
      WEBHOOK_SECRET_MISSING,
      'callbackUrl: this server signs webhooks and has no secret; its operator must set ' +
        'VQ_WEBHOOK_SECRET (or VQ_WEBHOOK_SECRET_FILE)',
    );
  }
  const why = forbiddenHost(url, settings.allow);
  if (why !== undefined) throw refused(url.host, why);
  return url.href;
}

/**
 * `checkCallbackUrl`, and the host name resolved (all its addresses, within VQ_WEBHOOK_TIMEOUT):
 * one internal address among them refuses the URL. Called before a batch with a callbackUrl is
 * stored; the sender judges the addresses again at each connection (DNS answers change).
 */
export async function checkCallbackTarget(
  raw: string,
  settings: Pick<WebhookSettings, 'allow' | 'secret' | 'timeoutMs'>,
  resolve: Resolve,
): Promise<string> {
  const href = checkCallbackUrl(raw, settings);
  const url = new URL(href);
  if (hostNamedExactly(url.host, settings.allow) || ipLiteral(url.hostname) !== undefined) return href;
  const unresolved = new InputError(
    CALLBACK_HOST_UNRESOLVED,
    `callbackUrl: host ${url.hostname} does not resolve to any address from this server; check the name`,
  );
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = clock.setTimeout(() => reject(unresolved), settings.timeoutMs);
  });
  try {
    const answers = await Promise.race([resolve(url.hostname), late]).catch(() => {
      throw unresolved;
    });
    if (answers.length === 0) throw unresolved;
    // Which address, and why, is not said: a tenant must not map this network's names through us.
    if (answers.some((a) => forbiddenAddress(a.address) !== undefined))
      throw refused(url.host, 'a name that resolves to an address webhooks may not reach');
    return href;
  } finally {
    clock.clearTimeout(timer);
  }
}
