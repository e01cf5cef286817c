// Service tokens for /v1. An administrator's token (VQ_API_TOKENS, VQ_API_TOKENS_FILE) sees every
// account; a token listed under an account in VQ_ACCOUNTS_FILE sees only that account's batches.
// A token is sent as `Authorization: Bearer <token>` or `x-api-key:
// <token>` and compared in constant time: both sides are hashed (sha256) so the comparison runs over
// equal lengths whatever was sent, and every configured token is compared, so the time says nothing
// about which one matched or how much of it. No tokens configured means no access at all, never
// open access. A tokens file is re-read when it changes (rotation without a restart).
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import type { IncomingHttpHeaders } from 'node:http';
import type { TokenSource } from '../config.js';
import type { Logger } from '../logger.js';
import { ApiError } from './errors.js';

/** Tokens shorter than this are ignored (the same floor as VQ_API_TOKENS). */
export const MIN_TOKEN_LENGTH = 16;

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/** The token a request presents, or undefined. A non-Bearer Authorization header presents none. */
export function presentedToken(headers: IncomingHttpHeaders): string | undefined {
  const authorization = headers.authorization;
  if (typeof authorization === 'string' && authorization !== '') {
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
    if (match) return match[1];
  }
  const apiKey = headers['x-api-key'];
  return typeof apiKey === 'string' && apiKey !== '' ? apiKey.trim() : undefined;
}

/** True when `token` is one of `hashes`; compares against all of them, in constant time each. */
export function matchesAny(token: string, hashes: readonly Buffer[]): boolean {
  const presented = sha256(token);
  let found = false;
  for (const hash of hashes) found = timingSafeEqual(presented, hash) || found;
  return found;
}

/** What a token may see: everything (an administrator's token) or the batches of some accounts. */
export type Scope = { admin: true } | { admin: false; accounts: readonly string[] };

/** One source of tokens (inline or a file re-read when it changes), all with the same scope. */
class TokenSet {
  readonly #source: TokenSource;
  readonly #logger: Logger;
  #hashes: Buffer[] = [];
  /** What the tokens file looked like when last read; a change means read it again. */
  #fileStamp: string | undefined;
  #loading: Promise<void> | undefined;

  constructor(source: TokenSource, logger: Logger) {
    this.#source = source;
    this.#logger = logger;
    if (source.kind === 'inline')
      this.#hashes = usable(
        source.secrets.map((s) => s.reveal()),
        logger,
      );
  }

  async current(): Promise<Buffer[]> {
    if (this.#source.kind !== 'file') return this.#hashes;
    const path = this.#source.path;
    this.#loading ??= this.#refresh(path).finally(() => {
      this.#loading = undefined;
    });
    await this.#loading;
    return this.#hashes;
  }

  async #refresh(path: string): Promise<void> {
    let stamp: string;
    try {
      const s = await stat(path);
      stamp = `${s.ino}:${s.size}:${s.mtimeMs}`;
      if (stamp === this.#fileStamp) return;
      const tokens = (await readFile(path, 'utf8'))
        .split(/\r?\n/)
        .map((line) => line.trim())
        .filter((line) => line !== '' && !line.startsWith('#'));
      this.#hashes = usable(tokens, this.#logger);
      this.#logger.info({ tokens: this.#hashes.length }, 'service tokens file read');
    } catch (err) {
      // Fail closed: an unreadable file means no tokens, until it can be read again.
      stamp = 'unreadable';
      if (this.#fileStamp !== stamp) this.#logger.error({ path, err: (err as Error).message }, 'cannot read the service tokens file; its tokens are refused');
      this.#hashes = [];
    }
    this.#fileStamp = stamp;
  }
}

export interface TokenGrant {
  source: TokenSource | undefined;
  /** The accounts the tokens are scoped to; undefined: administrators (every account). */
  accounts?: readonly string[];
}

export class TokenAuth {
  readonly #sets: { set: TokenSet; accounts: readonly string[] | undefined }[];

  constructor(grants: readonly TokenGrant[], logger: Logger) {
    this.#sets = grants.flatMap((g) => (g.source ? [{ set: new TokenSet(g.source, logger), accounts: g.accounts }] : []));
  }

  /**
   * What the request's token may see; throws ApiError 503 AUTH_NOT_CONFIGURED or 401 UNAUTHORIZED.
   * Every configured token is compared (a token listed under two accounts sees both).
   */
  async check(headers: IncomingHttpHeaders): Promise<Scope> {
    const sets = await Promise.all(this.#sets.map(async (s) => ({ hashes: await s.set.current(), accounts: s.accounts })));
    if (sets.every((s) => s.hashes.length === 0)) {
      throw new ApiError(503, 'AUTH_NOT_CONFIGURED', "this API has no service tokens configured (VQ_API_TOKENS, VQ_API_TOKENS_FILE or an account's tokens), so it serves no one");
    }
    const token = presentedToken(headers);
    if (token === undefined) throw new ApiError(401, 'UNAUTHORIZED', 'send a service token as "Authorization: Bearer <token>" or "x-api-key: <token>"');
    let admin = false;
    let matched = false;
    const accounts = new Set<string>();
    for (const s of sets) {
      if (!matchesAny(token, s.hashes)) continue;
      matched = true;
      if (s.accounts === undefined) admin = true;
      else for (const a of s.accounts) accounts.add(a);
    }
    if (!matched) throw new ApiError(401, 'UNAUTHORIZED', 'the service token is not valid');
    return admin ? { admin: true } : { admin: false, accounts: [...accounts] };
  }
}

/** Whether a scope may see the account's batches. */
export function canSee(scope: Scope, account: string): boolean {
  return scope.admin || scope.accounts.includes(account);
}

function usable(tokens: readonly string[], logger: Logger): Buffer[] {
  const short = tokens.filter((t) => t.length < MIN_TOKEN_LENGTH).length;
  if (short > 0) logger.warn({ ignored: short }, `service tokens shorter than ${MIN_TOKEN_LENGTH} characters are ignored`);
  return tokens.filter((t) => t.length >= MIN_TOKEN_LENGTH).map(sha256);
}
