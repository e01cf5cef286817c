// `vqb check` against a hostile upstream (docs/security.md, "The upstream is untrusted"): it reads
// at most MAX_CHECK_BYTES within twice the request timeout, survives absurd rate-limit headers and
// prints the upstream's escape sequences inert. Spawned as a user runs it; needs `npm run build`.
import { spawn } from 'node:child_process';
import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, useHarness } from '../helpers/engine.js';
import { errorBody, type HostileRule, startHostileUpstream } from '../helpers/hostile-upstream.js';
import { BIN, harnessEnv } from '../helpers/process.js';

const harness = useHarness();
let started: Harness | undefined;
afterEach(() => {
  started = undefined;
});

/** `vqb check` under /usr/bin/time: its output, exit code, peak memory (KiB) and wall time. */
async function check(
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; maxRssKiB: number; ms: number }> {
  const started = Date.now();
  const child = spawn('/usr/bin/time', ['-f', 'maxrss=%M', process.execPath, BIN, 'check'], { env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const code = await new Promise<number | null>((r) => child.on('close', r));
  const rss = /maxrss=(\d+)/.exec(stderr);
  return { code, stdout, maxRssKiB: Number(rss?.[1] ?? Number.NaN), ms: Date.now() - started };
}

async function against(rule: HostileRule, extra: Record<string, string> = {}) {
  const upstream = await startHostileUpstream(rule);
  // One harness a test (its simulator answers what no rule does); a second call reuses it.
  const h = started ?? (await harness.start({ label: 'hostile-check', workers: 0 }));
  started = h;
  upstream.target = h.sim.url;
  try {
    return await check(harnessEnv(h, { VQ_BASE_URL: upstream.url, ...extra }));
  } finally {
    await upstream.close();
  }
}

/** A 404 whose body is `total` bytes of JSON-looking text, written as fast as the reader takes it. */
function hugeBody(total: number): (res: ServerResponse) => void {
  return (res) => {
    const chunk = Buffer.alloc(1 << 20, 'a');
    let sent = 0;
    const more = () => {
      while (sent < total) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end();
    };
    res.on('error', () => undefined);
    more();
  };
}

describe('vqb check against a hostile upstream', () => {
  it('(6) a 1 GiB answer: read up to its cap, under 100 MB of memory beyond a plain check', async () => {
    const baseline = await against(() => undefined);
    const huge = await against(() => ({ status: 404, body: hugeBody(1 << 30) }));
    console.log(
      `vqb check peak memory: ${Math.round(huge.maxRssKiB / 1024)} MB on a 1 GiB body ` +
        `(${Math.round(baseline.maxRssKiB / 1024)} MB on a plain answer), ${huge.ms} ms`,
    );
    expect(huge.stdout).toMatch(/^account default: /);
    // A plain check's peak (the modules `vqb` loads) is the floor; the body adds next to nothing
    // (the old code held the whole GiB, 3.3 GB at its peak).
    expect(huge.maxRssKiB - baseline.maxRssKiB).toBeLessThan(100 * 1024);
  }, 120_000);

  it('(6) a body trickled a byte at a time: ends at the request’s overall bound, twice its timeout', async () => {
    const trickle = (res: ServerResponse) => {
      const timer = setInterval(() => res.write(' '), 100);
      res.on('close', () => clearInterval(timer));
      res.on('error', () => undefined);
    };
    const slow = await against(() => ({ status: 404, body: trickle }), { VQ_REQUEST_TIMEOUT: '1s' });
    console.log(`vqb check on a trickled body: ${slow.ms} ms, timeout 1 s`);
    // Ended by the request's own overall bound (twice the timeout), which names itself: not by a
    // per-chunk timeout (a byte every 100 ms resets it) nor by this test's kill.
    expect(slow.stdout).toMatch(/^account default: UNREACHABLE: .*within 2000 ms/);
  }, 120_000);

  it('(7) X-RateLimit-Reset: 1e20 with nothing left: a line per account, no crash', async () => {
    const out = await against(() => ({
      status: 0,
      headers: { 'x-ratelimit-reset': '1e20', 'x-ratelimit-remaining': '0' },
    }));
    expect(out.stdout).toMatch(/^account default: OK: /);
    expect(out.code).toBe(0);
  }, 60_000);

  it('(8) an answer with terminal escape sequences: printed inert', async () => {
    const message = 'denied\u001b]0;pwned\u0007\u001b[2J\u009b31m';
    const out = await against(() => ({ status: 401, body: errorBody(401, 'INVALID_API_KEY', message) }));
    expect(out.stdout).toContain('\\u001b]0;pwned');
    expect(out.stdout).not.toMatch(/[\u001b\u0007\u009b]/);
    expect(out.code).toBe(3);
  }, 60_000);
});
