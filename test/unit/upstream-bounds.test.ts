// The upstream is untrusted (docs/security.md): each pure reading an attacker upstream could
// abuse, replayed as the attack. Texts are cut where the error is built, numbers past the sane
// range are no hint, answers are data (own properties, bounded depth), printed text is inert.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parseDeadline } from '../../src/plans/deadline.js';
import { MAX_UPSTREAM_TEXT, MAX_WAIT_MS, printable } from '../../src/upstream/bounds.js';
import { BadResponseError } from '../../src/upstream/errors.js';
import { errorFromResponse, parseQueryBody } from '../../src/upstream/response.js';
import { parseRateLimitHeaders, retryAfterFrom429 } from '../../src/upstream/timing.js';
import { writeChanges } from '../../src/watch/changes-export.js';
import { compare, flatten } from '../../src/watch/diff.js';
import { decide } from '../../workers/actions.js';

const NOW = Date.parse('2026-11-27T12:00:00Z');
const BIG = 'x'.repeat(5 * 1024 * 1024);

describe('answers are data: fields named like Object.prototype members', () => {
  it('a field that appears or goes is compared as text, never as an inherited function', async () => {
    const none = new Set<string>();
    const before = flatten({ plate: 'ABC1234', owner: { name: 'A' } }, none);
    const after = flatten({ plate: 'ABC1234', constructor: 'x', toString: 'y', hasOwnProperty: 'z' }, none);
    const changes = [...compare(before, after), ...compare(after, before)];
    for (const c of changes) {
      expect(typeof c.before).toBe('string');
      expect(typeof c.after).toBe('string');
    }
    expect(compare(before, after)).toContainEqual({ field: 'constructor', before: '', after: 'x' });
    expect(compare(after, before)).toContainEqual({ field: 'toString', before: 'y', after: '' });
    // The round's changes file is written (on the old code csv-stringify emitted an 'error' nobody
    // listened to: the process exited).
    const out = new PassThrough();
    const text: Buffer[] = [];
    out.on('data', (c: Buffer) => text.push(c));
    const lines = changes.map((c) => ({ round: 2, plate: 'ABC1234', ...c, at: '2026-11-27T12:00:00Z' }));
    await writeChanges(out, lines, 'csv', ',');
    expect(Buffer.concat(text).toString()).toContain('ABC1234,constructor,,x');
  });
});

describe('upstream texts are cut where the error is built', () => {
  it('a 400 with a 5 MB message, a 503 with 4 MB, a 401 with 2 MB: message and stack a few KB', () => {
    for (const [status, code] of [
      [400, 'BAD_PLATE'],
      [503, 'UNAVAILABLE'],
      [401, 'INVALID_API_KEY'],
      [429, 'RATE_LIMIT_EXCEEDED'],
      [403, 'INSUFFICIENT_PERMISSIONS'],
    ] as const) {
      const body = JSON.stringify({ statusCode: status, error: { code, message: BIG } });
      const error = errorFromResponse('create', status, {}, body, NOW);
      expect(error.message.length, `${status}`).toBeLessThan(MAX_UPSTREAM_TEXT + 400);
      expect(error.stack?.length ?? 0, `${status}`).toBeLessThan(MAX_UPSTREAM_TEXT + 4_000);
    }
    const longCode = errorFromResponse('create', 400, {}, JSON.stringify({ error: { code: BIG } }), NOW);
    expect(longCode.code.length).toBeLessThan(400);
  });

  it('a 2xx whose state is 1 MB: the unreadable answer’s state and message are a few KB', () => {
    const body = JSON.stringify({ queryId: 'q1', status: 'S'.repeat(1024 * 1024) });
    try {
      parseQueryBody('get', 200, body, 'q1');
      expect.unreachable();
    } catch (err) {
      const e = err as { state: string; message: string };
      expect(e.state.length).toBeLessThan(400);
      expect(e.message.length).toBeLessThan(MAX_UPSTREAM_TEXT + 400);
    }
  });
});

describe('every number from the upstream is clamped', () => {
  const error = (more: object) => ({ error: { code: 'RATE_LIMIT_EXCEEDED', ...more } });
  it('absurd waits are no hint; sane ones are kept', () => {
    expect(retryAfterFrom429({}, error({ retryAfterMs: 1e16 }), NOW)).toBeUndefined();
    expect(retryAfterFrom429({}, error({ retryAfterMs: 1e300 }), NOW)).toBeUndefined();
    expect(retryAfterFrom429({}, error({ retryAfter: 1e300 }), NOW)).toBeUndefined();
    expect(retryAfterFrom429({ 'retry-after': '1e20' }, undefined, NOW)).toBeUndefined();
    expect(retryAfterFrom429({ 'x-ratelimit-reset': '1e20', 'x-ratelimit-remaining': '0' }, undefined, NOW)).toBe(
      undefined,
    );
    // An absurd body field does not hide a sane header.
    expect(retryAfterFrom429({ 'retry-after': '30' }, error({ retryAfterMs: 1e300 }), NOW)).toBe(30_000);
    expect(retryAfterFrom429({}, error({ retryAfterMs: 1500 }), NOW)).toBe(1500);
    expect(retryAfterFrom429({}, error({ retryAfter: 6 * 3600 }), NOW)).toBe(6 * 3_600_000);
    expect(retryAfterFrom429({}, error({ retryAfterMs: MAX_WAIT_MS + 1 }), NOW)).toBeUndefined();
  });

  it('a reset of 1e20 is no reset; a limit of 1e300 no limit', () => {
    const read = parseRateLimitHeaders(
      { 'x-ratelimit-reset': '1e20', 'x-ratelimit-remaining': '0', 'x-ratelimit-limit': '1e300' },
      NOW,
    );
    expect(read).toEqual({ remaining: 0 });
    expect(parseRateLimitHeaders({ ratelimit: 'limit=10, remaining=0, reset=1e300' }, NOW).resetAt).toBeUndefined();
    expect(parseRateLimitHeaders({ 'x-ratelimit-reset': '60' }, NOW).resetAt).toBe(NOW + 60_000);
  });

  it('a deadline past the Date range is BAD_DEADLINE, not a date that throws later', () => {
    for (const deadline of ['99999999999d', 8_640_000_000_000_001, '1e30h'])
      expect(() => parseDeadline({ deadline }, NOW), String(deadline)).toThrow(
        expect.objectContaining({ code: 'BAD_DEADLINE' }),
      );
    expect(parseDeadline({ deadline: '2h' }, NOW)).toBe(NOW + 7_200_000);
  });
});

describe('JSON nested past the limit', () => {
  it('is BAD_RESPONSE, final: a poll is not sent again (no stack overflow, no paid retries)', () => {
    const deep = `${'{"a":'.repeat(6_000)}1${'}'.repeat(6_000)}`;
    const body = `{"queryId":"q1","status":"COMPLETED","result":${deep}}`;
    let error: unknown;
    try {
      parseQueryBody('get', 200, body, 'q1');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(BadResponseError);
    expect(decide(error as BadResponseError).action).toBe('fail');
    // Brackets inside strings do not count.
    const text = `{"queryId":"q1","status":"COMPLETED","note":"${'['.repeat(500)}"}`;
    expect(parseQueryBody('get', 200, text, 'q1').state).toBe('completed');
    // An ordinary unreadable poll is still retried.
    expect(decide(new BadResponseError('get', 200, 'not JSON')).action).toBe('retry');
  });
});

describe('printed text is inert', () => {
  it('escape sequences are shown, not obeyed', () => {
    const hostile = 'DENIED\u001b]0;pwned\u0007\u001b[2J\u009b31m done\n\tnext';
    const shown = printable(hostile);
    expect(shown).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(shown).toContain('\\u001b]0;pwned');
    expect(shown).toContain('done\n\tnext');
  });
});
