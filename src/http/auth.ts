// Service tokens for /v1. An administrator's token (VQ_API_TOKENS, VQ_API_TOKENS_FILE) sees every
// account; a token listed under an account in VQ_ACCOUNTS_FILE sees only that account's batches.
// A token is sent as `Authorization: Bearer <token>` or `x-api-key:
// <token>` and compared in constant time: both sides are hashed (sha256) so the comparison runs over
// equal lengths whatever was sent, and every configured token is compared, so the time says nothing
// about which one matched or how much of it. No tokens configured means no access at all, never
// open access. A tokens file is re-read when it changes (rotation without a restart).
//
// An upstream key is never a service token: a client holding it could call the upstream directly
// and spend the account's quota. A configured token equal to any account's key stops start-up
// (ConfigError); one added to a tokens file later is refused like an unknown token (the answer
// does not say why, so it cannot be used to check a guessed key) and logged as a warning.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../config.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { ApiKeySource, TokenSource } from '../setting-values.js';
import { createKeyProvider, type KeyProvider } from '../upstream/key.js';
import { ApiError } from './errors.js';

/** Tokens shorter than this are ignored (the same floor as VQ_API_TOKENS). */
export const MIN_TOKEN_LENGTH = 16;

export const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

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

/** True when a token's sha256 is one of `hashes` (the console's session keeps only the digest). */
export function matchesDigest(presented: Buffer, hashes: readonly Buffer[]): boolean {
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
      if (this.#fileStamp !== stamp)
        this.#logger.error(
          { path, err: (err as Error).message },
          'cannot read the service tokens file; its tokens are refused',
        );
      this.#hashes = [];
    }
    this.#fileStamp = stamp;
  }
}

export interface TokenGrant {
  source: TokenSource | undefined;
  /** The accounts the tokens are scoped to; undefined: administrators (every account). */
  accounts?: readonly string[];
  /** Where the tokens are configured, for a start-up error (VQ_API_TOKENS, VQ_ACCOUNTS_FILE…). */
  setting?: string;
}

/** An account's upstream key, which no token may equal. */
export interface UpstreamKey {
  account: string;
  source: ApiKeySource;
}

export class TokenAuth {
  readonly #sets: { set: TokenSet; accounts: readonly string[] | undefined; setting: string }[];
  readonly #keys: { account: string; read: KeyProvider }[];
  readonly #logger: Logger;

  constructor(grants: readonly TokenGrant[], logger: Logger, keys: readonly UpstreamKey[] = []) {
    this.#sets = grants.flatMap((g) =>
      g.source
        ? [{ set: new TokenSet(g.source, logger), accounts: g.accounts, setting: g.setting ?? 'service tokens' }]
        : [],
    );
    this.#keys = keys.map((k) => ({ account: k.account, read: createKeyProvider(k.source) }));
    this.#logger = logger;
  }

  /**
   * The tokens of a Config: administrators' (VQ_API_TOKENS[_FILE]) and each account's, checked
   * against every account's upstream key. Throws ConfigError when a configured token is a key.
   */
  static async fromConfig(config: Pick<Config, 'http' | 'accounts'>, logger: Logger): Promise<TokenAuth> {
    const admin = config.http.tokens?.kind === 'file' ? 'VQ_API_TOKENS_FILE' : 'VQ_API_TOKENS';
    const auth = new TokenAuth(
      [
        { source: config.http.tokens, setting: admin },
        ...config.accounts.map((a) => ({
          source: a.tokens,
          accounts: [a.id],
          setting: `VQ_ACCOUNTS_FILE (account ${a.id}'s tokens)`,
        })),
      ],
      logger,
      config.accounts.flatMap((a) => (a.apiKey ? [{ account: a.id, source: a.apiKey }] : [])),
    );
    const keys = await auth.#keyHashes();
    for (const s of auth.#sets) {
      const hashes = await s.set.current();
      const clash = keys.find((k) => hashes.some((h) => timingSafeEqual(h, k.hash)));
      if (clash) {
        throw new ConfigError(
          s.setting,
          `a service token is the upstream key of account ${clash.account}; the upstream key must ` +
            `never be a service token (anyone holding it can spend the account's quota directly): ` +
            `give clients tokens of their own`,
        );
      }
    }
    return auth;
  }

  /** The upstream keys as they are now (a key file is re-read when it changes); an unreadable one is skipped. */
  async #keyHashes(): Promise<{ account: string; hash: Buffer }[]> {
    const read = await Promise.all(
      this.#keys.map(async (k) => ({ account: k.account, key: await k.read().catch(() => undefined) })),
    );
    return read.flatMap((k) =>
      k.key === undefined || k.key === '' ? [] : [{ account: k.account, hash: sha256(k.key) }],
    );
  }

  /**
   * What the request's token may see; throws ApiError 503 AUTH_NOT_CONFIGURED or 401 UNAUTHORIZED.
   * Every configured token is compared (a token listed under two accounts sees both).
   */
  async check(headers: IncomingHttpHeaders): Promise<Scope> {
    const token = presentedToken(headers);
    return this.checkDigest(token === undefined ? undefined : sha256(token));
  }

  /**
   * The same check for a token's sha256: the console signs in with a token and keeps only its
   * digest in the session, checked again on every request (a token removed from the
   * configuration ends its sessions at once).
   */
  async checkDigest(digest: Buffer | undefined): Promise<Scope> {
    const [sets, keys] = await Promise.all([
      Promise.all(this.#sets.map(async (s) => ({ hashes: await s.set.current(), accounts: s.accounts }))),
      this.#keyHashes(),
    ]);
    if (sets.every((s) => s.hashes.length === 0)) {
      throw new ApiError(
        'AUTH_NOT_CONFIGURED',
        'this API has no service tokens configured (VQ_API_TOKENS, VQ_API_TOKENS_FILE or an ' +
          "account's tokens), so it serves no one",
      );
    }
    if (digest === undefined)
      throw new ApiError(
        'UNAUTHORIZED',
        'send a service token as "Authorization: Bearer <token>" or "x-api-key: <token>"',
      );
    let admin = false;
    let matched = false;
    const accounts = new Set<string>();
    for (const s of sets) {
      if (!matchesDigest(digest, s.hashes)) continue;
      matched = true;
      if (s.accounts === undefined) admin = true;
      else for (const a of s.accounts) accounts.add(a);
    }
    // Compared whatever the outcome above, so the time does not tell a key from a token.
    const isKey = matchesDigest(
      digest,
      keys.map((k) => k.hash),
    );
    if (isKey)
      this.#logger.warn(
        { code: 'UPSTREAM_KEY_AS_TOKEN' },
        'refused a request that presented an upstream key as its service token (is the key in a ' +
          'tokens file? has it reached a client?)',
      );
    if (!matched || isKey) throw new ApiError('UNAUTHORIZED', 'the service token is not valid');
    return admin ? { admin: true } : { admin: false, accounts: [...accounts] };
  }
}

/** Whether a scope may see the account's batches. */
export function canSee(scope: Scope, account: string): boolean {
  return scope.admin || scope.accounts.includes(account);
}

/**
 * Tokens printed in our own examples (secrets/vqb_api_tokens.example, the docs): anyone who read
 * them knows them, so a deployment that copied one as it is serves no one with it.
 */
export const EXAMPLE_TOKENS: readonly string[] = ['change-me-to-a-long-random-token'];

function usable(tokens: readonly string[], logger: Logger): Buffer[] {
  const short = tokens.filter((t) => t.length < MIN_TOKEN_LENGTH).length;
  if (short > 0)
    logger.warn({ ignored: short }, `service tokens shorter than ${MIN_TOKEN_LENGTH} characters are ignored`);
  const examples = tokens.filter((t) => EXAMPLE_TOKENS.includes(t)).length;
  if (examples > 0)
    logger.error(
      { ignored: examples },
      "a service token is the documentation's example token and is refused: generate one (openssl rand -hex 24)",
    );
  return tokens.filter((t) => t.length >= MIN_TOKEN_LENGTH && !EXAMPLE_TOKENS.includes(t)).map(sha256);
}
