// Where a webhook may go: an http(s) URL, without credentials in it, to a host the allow-list
// (VQ_WEBHOOK_ALLOW) names, and only when a signing secret is configured. Checked when a batch is
// made (nothing is stored when the URL is refused) and again before each delivery, so a host
// taken off the list gets nothing more.
import type { WebhookSettings } from '../../config.js';
import { InputError } from '../../errors.js';

/** The URL is not one vqb sends to (not http(s), malformed, credentials in it). */
export const CALLBACK_URL_INVALID = 'CALLBACK_URL_INVALID';
/** The URL's host is not on VQ_WEBHOOK_ALLOW. */
export const CALLBACK_HOST_NOT_ALLOWED = 'CALLBACK_HOST_NOT_ALLOWED';
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

/** The URL as it will be stored and called; throws InputError with one of the codes above. */
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
      'callbackUrl: this server signs webhooks and has no secret; its operator must set VQ_WEBHOOK_SECRET (or VQ_WEBHOOK_SECRET_FILE)',
    );
  }
  return url.href;
}
