// One error table: every code vqb throws is defined once in src/error-codes.ts with its HTTP status
// and exit code. The types already refuse an unknown code at most throw sites; this reads the
// source as a reviewer would, so a code built some other way (a constant, a template) is caught
// too, and an entry nothing throws any more is found.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, isErrorCode } from '../../src/error-codes.js';
import { InputError } from '../../src/errors.js';
import { ApiError, describeError } from '../../src/http/errors.js';

const ROOT = join(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(ROOT, path)).isDirectory() ? sources(path) : name.endsWith('.ts') ? [path] : [];
  });
}

const CODE = sources('src').filter((f) => !f.startsWith('src/simulator/'));
/** The upstream's failures carry its codes, HTTP_<status> and network codes through to outcomes: not ours to define. */
const UPSTREAM_CLASSES =
  /^(?:Transient|Permanent|BadResponse|RateLimited|Permission|InvalidKey|ExpiredKey|Upstream)Error$/;
const FORMATS = ['CSV', 'XLSX'];

/** Every code a `new XError(…)` or `super(…)` of ours passes, as written in the source. */
function thrownCodes(): { file: string; code: string }[] {
  const out: { file: string; code: string }[] = [];
  for (const file of CODE) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const constants = new Map(
      [...text.matchAll(/const ([A-Z][A-Z0-9_]+) = '([A-Z][A-Z0-9_]+)'/g)].map((m) => [m[1]!, m[2]!]),
    );
    for (const m of text.matchAll(
      /new (\w+Error)\(\s*(?:'([A-Z][A-Z0-9_]+)'|`\$\{format\}_([A-Z0-9_]+)`|([A-Z][A-Z0-9_]+)\s*,)/g,
    )) {
      // A ConfigError's first argument names the setting; its code is CONFIG_INVALID (its super call).
      if (UPSTREAM_CLASSES.test(m[1]!) || m[1] === 'ConfigError') continue;
      if (m[2]) out.push({ file, code: m[2] });
      else if (m[3]) for (const f of FORMATS) out.push({ file, code: `${f}_${m[3]}` });
      else if (m[4] && constants.has(m[4])) out.push({ file, code: constants.get(m[4])! });
    }
    if (!/extends UpstreamError|class UpstreamError/.test(text))
      for (const m of text.matchAll(/super\(\s*'([A-Z][A-Z0-9_]+)'/g)) out.push({ file, code: m[1]! });
  }
  return out;
}

describe('the error table', () => {
  it('has an entry for every code thrown anywhere in src/', () => {
    const thrown = thrownCodes();
    expect(thrown.length).toBeGreaterThan(60);
    expect(thrown.filter(({ code }) => !isErrorCode(code))).toEqual([]);
  });

  it('lists no code that nothing raises (upstream codes aside)', () => {
    const text = CODE.map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
    const thrown = new Set(thrownCodes().map((t) => t.code));
    const upstream = [
      'INVALID_API_KEY',
      'EXPIRED_API_KEY',
      'INSUFFICIENT_PERMISSIONS',
      'RATE_LIMIT_EXCEEDED',
      'BAD_RESPONSE',
    ];
    // Codes raised by reader rules under CSV_ and renamed XLSX_ for workbooks count as raised.
    const unused = Object.keys(ERROR_CODES).filter(
      (code) =>
        !thrown.has(code) &&
        !upstream.includes(code) &&
        !text.includes(`'${code}'`) &&
        !thrown.has(code.replace(/^XLSX_/, 'CSV_')),
    );
    expect(unused).toEqual([]);
  });

  it('gives the API its status: an InputError and an ApiError answer with their table entry, a renamed code with the client code', () => {
    expect(describeError(new InputError('CSV_NO_PLATE_COLUMN', 'x'))?.statusCode).toBe(422);
    expect(describeError(new InputError('XLSX_TOO_LARGE', 'x'))?.statusCode).toBe(413);
    expect(describeError(new ApiError('UNAUTHORIZED', 'x'))).toEqual({
      statusCode: 401,
      error: { code: 'UNAUTHORIZED', message: 'x' },
    });
    const notFound = describeError(new ApiError('BATCH_NOT_FOUND', 'no batch with id x'));
    expect(notFound).toEqual({ statusCode: 404, error: { code: 'NOT_FOUND', message: 'no batch with id x' } });
  });
});
