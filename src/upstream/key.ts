// Where the client gets the API key for each request. A key file is re-read when its mtime changes,
// so an operator rotates an expired key by rewriting the file and running `vqb resume`, with no
// restart. The key is only ever held in memory and sent in the x-api-key header.
//
// The file is looked at with a synchronous stat before every request: a few µs on the main thread,
// where `fs/promises.stat` goes through libuv's thread pool and wakes the event loop once more a
// request (about 90 µs of CPU each on the 2-core machine, measured beside an idle loop). Key files
// are local (a secrets mount is tmpfs); a hung network mount would stall the process either way.
import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import type { ApiKeySource } from '../setting-values.js';

export type KeyProvider = () => Promise<string>;

export function createKeyProvider(source: ApiKeySource): KeyProvider {
  if (source.kind === 'inline') {
    const key = source.secret.reveal();
    return async () => key;
  }
  let cached: { mtimeMs: number; key: string } | undefined;
  return async () => {
    let mtimeMs: number;
    let text: string | undefined;
    try {
      mtimeMs = statSync(source.path).mtimeMs;
      if (cached?.mtimeMs !== mtimeMs) text = readFileSync(source.path, 'utf8');
    } catch {
      throw new ConfigError('VQ_API_KEY_FILE', `cannot read the key file ${source.path}`);
    }
    if (text === undefined && cached) return cached.key;
    const key = (text ?? '').trim();
    if (key === '') throw new ConfigError('VQ_API_KEY_FILE', `the key file ${source.path} is empty`);
    // Sent as a header as is: a second line or a label would be a bad header, not a retryable failure.
    if (/[\s\x00-\x1f\x7f]/.test(key)) {
      throw new ConfigError(
        'VQ_API_KEY_FILE',
        `the key file ${source.path} must hold only the key, on one line, without spaces`,
      );
    }
    cached = { mtimeMs, key };
    return key;
  };
}
