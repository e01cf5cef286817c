// Service tokens for /v1. A token is sent as `Authorization: Bearer <token>` or `x-api-key:
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

export class TokenAuth {
  readonly #source: TokenSource | undefined;
  readonly #logger: Logger;
  #hashes: Buffer[] = [];
  /** What the tokens file looked like when last read; a change means read it again. */
  #fileStamp: string | undefined;
  #loading: Promise<void> | undefined;

  constructor(source: TokenSource | undefined, logger: Logger) {
    this.#source = source;
    this.#logger = logger;
    if (source?.kind === 'inline')
      this.#hashes = usable(
        source.secrets.map((s) => s.reveal()),
        logger,
      );
  }

  /** Resolves when the request may go on; throws ApiError 503 AUTH_NOT_CONFIGURED or 401 UNAUTHORIZED. */
  async check(headers: IncomingHttpHeaders): Promise<void> {
    const hashes = await this.#current();
    if (hashes.length === 0) {
      throw new ApiError(503, 'AUTH_NOT_CONFIGURED', 'this API has no service tokens configured (VQ_API_TOKENS or VQ_API_TOKENS_FILE), so it serves no one');
    }
    const token = presentedToken(headers);
    if (token === undefined) throw new ApiError(401, 'UNAUTHORIZED', 'send a service token as "Authorization: Bearer <token>" or "x-api-key: <token>"');
    if (!matchesAny(token, hashes)) throw new ApiError(401, 'UNAUTHORIZED', 'the service token is not valid');
  }

  async #current(): Promise<Buffer[]> {
    if (this.#source?.kind !== 'file') return this.#hashes;
    this.#loading ??= this.#refresh(this.#source.path).finally(() => {
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
      if (this.#fileStamp !== stamp) this.#logger.error({ path, err: (err as Error).message }, 'cannot read the service tokens file; /v1 refuses every request');
      this.#hashes = [];
    }
    this.#fileStamp = stamp;
  }
}

function usable(tokens: readonly string[], logger: Logger): Buffer[] {
  const short = tokens.filter((t) => t.length < MIN_TOKEN_LENGTH).length;
  if (short > 0) logger.warn({ ignored: short }, `service tokens shorter than ${MIN_TOKEN_LENGTH} characters are ignored`);
  return tokens.filter((t) => t.length >= MIN_TOKEN_LENGTH).map(sha256);
}
