// Bad input from both sides. Files a user might hand to `vqb run` (random bytes, a renamed zip, huge
// fields, NUL bytes, mixed encodings, look-alike characters) and answers a broken upstream might
// give (HTML error pages, truncated or odd JSON, huge or endless bodies): each ends in a typed,
// readable error or a clear result; nothing crashes or hangs. Big and binary fixtures are made here,
// at test time, from a fixed seed.
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { InputError } from '../../src/errors.js';
import { readPlateCsv } from '../../src/producers/csv.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import {
  type AnyUpstreamError,
  BadResponseError,
  TransientError,
  UnrecognisedAnswerError,
  type UpstreamError,
} from '../../src/upstream/errors.js';
import { decide } from '../../workers/actions.js';
import { mulberry32 } from '../chaos/rng.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { harnessEnv, runVqb } from '../helpers/process.js';

const harness = useHarness();
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

function vqb(h: Harness, args: string[], env: Record<string, string> = {}) {
  return runVqb(args, harnessEnv(h, env));
}

/** Deterministic pseudo-random bytes. */
function bytes(n: number, seed: number, pick: (r: number) => number = (r) => Math.floor(r * 256)): Buffer {
  const rng = mulberry32(seed);
  const buf = Buffer.alloc(n);
  for (let i = 0; i < n; i++) buf[i] = pick(rng());
  return buf;
}

/** A minimal stored ZIP (what an .xlsx is), built by hand: local header, data, central directory. */
function zipOf(name: string, content: string): Buffer {
  const data = Buffer.from(content);
  const file = Buffer.from(name);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt32LE(data.length, 18);
  local.writeUInt32LE(data.length, 22);
  local.writeUInt16LE(file.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt32LE(data.length, 20);
  central.writeUInt32LE(data.length, 24);
  central.writeUInt16LE(file.length, 28);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(46 + file.length, 12);
  end.writeUInt32LE(30 + file.length + data.length, 16);
  return Buffer.concat([local, file, data, central, file, end]);
}

const header = 'placa;cliente\n';
const plateRows = (n: number, offset = 0) =>
  makePlates(n, offset)
    .map((p, i) => `${p};cliente ${i}`)
    .join('\n') + '\n';

describe('vqb run: files that cannot be used', () => {
  // Each: exit 2 (fix the input: nothing ran), nothing on stdout, one line on stderr saying what is
  // wrong, no stack trace, fast.
  const unusable: { name: string; file: () => Buffer; message: RegExp }[] = [
    { name: 'random bytes', file: () => bytes(256 * 1024, 1), message: /not a CSV file/ },
    {
      name: 'random control bytes without a NUL',
      file: () => bytes(64 * 1024, 2, (r) => 1 + Math.floor(r * 31)),
      message: /not a CSV file: \d+ control bytes/,
    },
    // A zip is read as a workbook whatever its name (the .xlsx reader says what it holds instead).
    {
      name: 'a zip archive renamed .csv',
      file: () => zipOf('plates.csv', header + plateRows(10)),
      message: /a zip archive, but not an Excel workbook \(it holds "plates.csv"\)/,
    },
    {
      name: 'UTF-16 ("Unicode text" from Excel)',
      file: () => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(header + plateRows(5), 'utf16le')]),
      message: /UTF-16/,
    },
    {
      name: 'a 10 MB single field',
      file: () => Buffer.from(`${header}ABC1234;${'x'.repeat(10 * 1024 * 1024)}\n`),
      message: /field (of|larger than).*65536/,
    },
    {
      name: 'a 10 MB unclosed quote',
      file: () => Buffer.from(`${header}ABC1234;"${'x'.repeat(10 * 1024 * 1024)}\n`),
      message: /unclosed quote|larger than/,
    },
    {
      name: 'a NUL byte early',
      file: () => Buffer.from(`${header}ABC1234;a\nAB\0C1235;b\n`),
      message: /not a CSV file: NUL byte at offset 26/,
    },
    {
      name: 'a 100,000-character field',
      file: () => Buffer.from(`${header}ABC1234;${'y'.repeat(100_000)}\n`),
      message: /100000 bytes, the limit is 65536/,
    },
    { name: 'an empty file', file: () => Buffer.alloc(0), message: /empty/ },
  ];
  for (const c of unusable) {
    it(`${c.name}: one readable line, exit 2`, async () => {
      const h = await harness.start({ label: 'badcsv', workers: 0 });
      const path = join(h.config.outDir, '..', `bad-${c.name.replace(/\W+/g, '-')}.csv`);
      await writeFile(path, c.file());
      const r = await vqb(h, ['run', path]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/^vqb: /);
      expect(r.stderr).not.toMatch(/unexpected error|\n\s+at /);
      expect(r.stderr).toMatch(c.message);
      expect(h.sim.stats().requests, 'nothing reached the upstream').toBe(0);
    });
  }

  it('a UTF-8 file with Windows-1252 bytes after 64 KiB: CSV_MIXED_ENCODING from the reader, one line from `vqb run`', async () => {
    // Starts as UTF-8 (an accent in the first rows), 9,000 ASCII rows later a Windows-1252 'ã'.
    const file = Buffer.concat([
      Buffer.from(`placa;cidade\nABC1234;São Paulo\n${plateRows(9_000)}`),
      Buffer.from('ZZZ9999;S\xe3o Paulo\n', 'latin1'),
    ]);
    const { rows } = await readPlateCsv(Readable.from([file]));
    const err = await (async () => {
      for await (const _ of rows);
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).code).toBe('CSV_MIXED_ENCODING');

    const h = await harness.start({ label: 'mixed', workers: 0 });
    const path = join(h.config.outDir, '..', 'mixed.csv');
    await writeFile(path, file);
    const r = await vqb(h, ['run', path]);
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^vqb: invalid UTF-8 near byte \d+: .*one encoding$/),
    ]);
  });

  const lateNul = async () => {
    const h = await harness.start({ label: 'late', workers: 0 });
    const path = join(h.config.outDir, '..', 'late-nul.csv');
    await writeFile(path, Buffer.concat([Buffer.from(header + plateRows(8_000)), Buffer.from('ABC\x00123;x\n')]));
    const r = await vqb(h, ['run', path]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^vqb: not a CSV file: NUL byte at offset \d+\n$/);
    return h;
  };

  it('a file found unusable late (NUL byte after 8,000 good rows): one line, exit 2', async () => {
    await lateNul();
  });

  // Was a bug: `vqb run` enqueued rows chunk by chunk while reading, so a file found unusable after
  // its first 1,000 rows left those plates queued (and paid for by the next worker). The file is now
  // read in full, as a check, before anything is enqueued.
  it('a file found unusable late enqueues nothing', async () => {
    const h = await lateNul();
    const counts = await h.services.accounts.counts('wait', 'prioritized', 'delayed', 'active');
    expect(
      Object.values(counts).reduce((a, b) => a + b, 0),
      `jobs left on the queue: ${JSON.stringify(counts)}`,
    ).toBe(0);
    // Nor waiting to be fed: no batch was stored at all.
    expect((await h.services.batchViews.list()).total).toBe(0);
  });
});

describe('vqb run: odd but usable files', () => {
  it('100,000-character lines of ordinary fields are read; plates in full-width normalise, other scripts are rejected', async () => {
    const h = await harness.start({ label: 'oddcsv', workers: 0 });
    const wide = Array.from({ length: 1_000 }, (_, i) => `c${i}`).join(';');
    const filler = (ch: string) => Array.from({ length: 1_000 }, () => ch.repeat(99)).join(';');
    // Decision: NFKD compatibility forms are the same letters (full-width ＡＢＣ１２３４, Latin letters
    // with an accent typed by mistake) and normalise; letters of other scripts that merely look
    // Latin (Cyrillic А, Greek Α) are different characters and the row is rejected, never mapped.
    // The row keeps its input as typed either way, so the export shows what was read.
    const rows = [
      ['ＡＢＣ１２３４', 'full-width'],
      ['ÁBC1D23', 'accented Latin'],
      ['\u0410BC1235', 'Cyrillic А'],
      ['\u0391BC1236', 'Greek Α'],
      ['ABC1\u0417 37', 'Cyrillic З for 3'],
      ['ABC1237', 'plain'],
    ];
    const text = `placa;obs;${wide}\n${rows.map(([plate, obs]) => `${plate};${obs};${filler('z')}`).join('\n')}\n`;
    expect(text.split('\n')[1]!.length).toBeGreaterThan(100_000);
    const path = join(h.config.outDir, '..', 'odd.csv');
    await writeFile(path, text);
    const r = await vqb(h, ['run', path]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const batchId = /batch (odd-[0-9a-f]{12})/.exec(r.stdout)![1]!;
    const out = (await readFile(join(h.config.outDir, `${batchId}.jsonl`), 'utf8'))
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { input: string; plate: string; status: string; error?: { code: string } });
    expect(out.map((o) => [o.input, o.status, o.status === 'rejected' ? o.error?.code : o.plate])).toEqual([
      ['ＡＢＣ１２３４', 'done', 'ABC1234'],
      ['ÁBC1D23', 'done', 'ABC1D23'],
      ['\u0410BC1235', 'rejected', 'BAD_LENGTH'],
      ['\u0391BC1236', 'rejected', 'BAD_LENGTH'],
      ['ABC1\u0417 37', 'rejected', 'BAD_LENGTH'],
      ['ABC1237', 'done', 'ABC1237'],
    ]);
    expect(Object.keys(h.sim.stats({ plates: true }).createsByPlate ?? {}).sort()).toEqual([
      'ABC1234',
      'ABC1237',
      'ABC1D23',
    ]);
  });

  // Was a finished batch of rejects (exit 0); a column picked by its content must hold mostly plates (issue 36).
  it('random high-bit bytes (no control bytes) read as Windows-1252 text: no column of plates, refused', async () => {
    const h = await harness.start({ label: 'noise', workers: 0 });
    const noise = bytes(32 * 1024, 3, (r) => 0x80 + Math.floor(r * 0x80));
    for (let i = 200; i < noise.length; i += 200) noise[i] = 0x0a;
    const path = join(h.config.outDir, '..', 'noise.csv');
    await writeFile(path, noise);
    const r = await vqb(h, ['run', path]);
    expect(r.stderr).toMatch(
      /^vqb: no column of the file holds plates: column ".+" was picked .* only 0 of its \d+ rows/,
    );
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect((await h.services.batchViews.list()).total).toBe(0);
    expect(h.sim.stats().requests).toBe(0);
  });
});

// --- the upstream side ---------------------------------------------------------------------------

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

async function serve(handler: Handler): Promise<string> {
  const server = createServer(handler);
  server.on('clientError', () => {});
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function client(baseUrl: string, requestTimeoutMs = 500) {
  return new UpstreamClient({
    baseUrl,
    apiKey: async () => 'bad-input-test-key',
    requestTimeoutMs,
    connectTimeoutMs: 500,
  });
}

async function failure(p: Promise<unknown>): Promise<UpstreamError> {
  try {
    await p;
  } catch (err) {
    return err as UpstreamError;
  }
  throw new Error('expected the call to fail');
}

describe('UpstreamClient against a broken upstream (real HTTP)', () => {
  const html =
    '<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1><p>nginx</p></body></html>';

  it('an HTML error page with 502 → TransientError HTTP_502, retryable, for both calls', async () => {
    const url = await serve((_req, res) => res.writeHead(502, { 'content-type': 'text/html' }).end(html));
    const c = client(url);
    for (const call of [c.createQuery('ABC1234'), c.getQuery('q1')]) {
      const err = await failure(call);
      expect(err).toBeInstanceOf(TransientError);
      expect({ code: err.code, status: err.status, kind: err.kind }).toEqual({
        code: 'HTTP_502',
        status: 502,
        kind: 'transient',
      });
      expect(err.message).toMatch(/502.*Bad Gateway/);
    }
    await c.close();
  });

  const bodies200: { name: string; body: string }[] = [
    { name: 'truncated JSON', body: '{"statusCode":200,"body":{"queryId":"q1","status":"COMPL' },
    { name: 'an HTML page', body: html },
    { name: 'an array', body: '[{"queryId":"q1","status":"COMPLETED"}]' },
    { name: 'a JSON string', body: '"ok"' },
    { name: 'null', body: 'null' },
    { name: 'an empty body', body: '' },
  ];
  for (const { name, body } of bodies200) {
    it(`200 with ${name} → BadResponseError: not retryable on create (it may have been paid), retryable on a poll`, async () => {
      const url = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
      const c = client(url);
      const created = await failure(c.createQuery('ABC1234'));
      expect(created).toBeInstanceOf(BadResponseError);
      expect({
        code: created.code,
        status: created.status,
        operation: (created as BadResponseError).operation,
      }).toEqual({
        code: 'BAD_RESPONSE',
        status: 200,
        operation: 'create',
      });
      const polled = await failure(c.getQuery('q1'));
      expect(polled).toBeInstanceOf(BadResponseError);
      expect(decide(polled as AnyUpstreamError).action).toBe('retry');
      await c.close();
    });
  }

  it('200 with an object without an id → UnrecognisedAnswerError: the account holds, the plate never fails', async () => {
    const body = '{"statusCode":201,"body":{"status":"PROCESSING"}}';
    const url = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
    const c = client(url);
    const created = await failure(c.createQuery('ABC1234'));
    expect(created).toBeInstanceOf(UnrecognisedAnswerError);
    expect(created.code).toBe('UNRECOGNISED_ANSWER');
    expect(decide(created as AnyUpstreamError).action).toBe('hold-answer');
    await c.close();
  });

  it('a 20 MB body declared or 64 MB chunked: a 200 is BadResponseError and a 502 stays TransientError; no wait for it all', async () => {
    const big = Buffer.alloc(20 * 1024 * 1024, 0x61);
    const CHUNKED_BYTES = 64 * 1024 * 1024;
    // Per query id: whether the server got to the end of its answer before the connection closed.
    const finished = new Map<string, Promise<boolean>>();
    const url = await serve((req, res) => {
      const status = req.url!.includes('e502') ? 502 : 200;
      finished.set(
        req.url!.split('/').pop()!,
        new Promise((resolve) => res.once('close', () => resolve(res.writableFinished))),
      );
      if (req.url!.includes('chunked')) {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.write('{"statusCode":200,"body":{"queryId":"q1","status":"COMPLETED","x":"');
        // 64 MB in 1 MB chunks with no content-length, respecting backpressure: far past what
        // loopback socket buffers take in once the client stops reading at the 16 MB limit (with
        // 20 MB, a loaded machine could let the server finish into the buffers: flaky).
        let sent = 0;
        const push = () => {
          while (!res.destroyed && sent < CHUNKED_BYTES) {
            sent += 1024 * 1024;
            if (!res.write(big.subarray(0, 1024 * 1024))) return void res.once('drain', push);
          }
          if (!res.destroyed) res.end('"}}');
        };
        push();
      } else {
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': big.length }).end(big);
      }
    });
    const c = client(url, 5_000);
    for (const id of ['declared', 'chunked']) {
      const ok = await failure(c.getQuery(id));
      expect(ok, id).toBeInstanceOf(BadResponseError);
      // A declared size is refused from the header alone; a chunked body is cut once past the limit.
      expect(ok.message, id).toMatch(
        id === 'declared' ? /answered with 20971520 bytes, over the \d+-byte limit/ : /passed the \d+-byte limit/,
      );
      const bad = await failure(c.getQuery(`${id}-e502`));
      expect(bad, id).toBeInstanceOf(TransientError);
      expect(bad.status).toBe(502);
    }
    // The client hung up on the chunked answers rather than reading them to their end.
    expect(await finished.get('chunked'), 'the 200 was read to its end').toBe(false);
    expect(await finished.get('chunked-e502'), 'the 502 was read to its end').toBe(false);
    await c.close();
  });

  it('a body that trickles for minutes ends at the client bound (twice requestTimeoutMs) as TransientError REQUEST_TIMEOUT', async () => {
    let requests = 0;
    let closed!: () => void;
    const connectionClosed = new Promise<void>((resolve) => (closed = resolve));
    const url = await serve((_req, res) => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"statusCode":200,');
      const timer = setInterval(() => res.write(' '), 100); // forever, well within the idle timeout
      res.on('close', () => {
        clearInterval(timer);
        closed();
      });
    });
    const c = client(url, 500);
    const started = Date.now();
    const err = await failure(c.getQuery('q1'));
    expect(err).toBeInstanceOf(TransientError);
    expect({ code: err.code, kind: err.kind }).toEqual({ code: 'REQUEST_TIMEOUT', kind: 'transient' });
    // The overall bound fired (not the per-chunk idle timeout, which the trickle keeps resetting),
    // and only once it was due: 2 × requestTimeoutMs.
    expect(err.message).toContain('within 1000 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    await connectionClosed; // the client gave the connection up: the trickle stopped
    expect(requests, 'one request, not retried by the client').toBe(1);
    await c.close();
  });

  it('headers that never come → TransientError (headers timeout or the overall bound, whichever fires first)', async () => {
    const url = await serve(() => {});
    const c = client(url, 300);
    const started = Date.now();
    const err = await failure(c.createQuery('ABC1234'));
    expect(err).toBeInstanceOf(TransientError);
    expect(['HEADERS_TIMEOUT', 'REQUEST_TIMEOUT']).toContain(err.code);
    expect(err.kind).toBe('transient');
    // Given up because of the configured timeout, not before it.
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    await c.close();
  });
});

describe('the pipeline with a broken upstream', () => {
  it('polls answered with truncated JSON or HTML-on-200 a few times are retried: the batch completes, each plate created once', async () => {
    // Creates answer normally; each query's first polls come back broken, then it completes.
    // One plate's create answers HTML with 200: it fails at once (a retry could pay twice).
    const queries = new Map<string, { plate: string; polls: number }>();
    const createsByPlate = new Map<string, number>();
    let broken = 0;
    const HTML_CREATE = 'HTM1L00';
    const url = await serve((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const json = (status: number, value: unknown) =>
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
        if (req.method === 'POST') {
          const plate = (JSON.parse(body) as { keys: { licensePlate: string } }).keys.licensePlate;
          createsByPlate.set(plate, (createsByPlate.get(plate) ?? 0) + 1);
          if (plate === HTML_CREATE)
            return res
              .writeHead(200, { 'content-type': 'text/html' })
              .end('<html><body>Welcome to nginx!</body></html>');
          const queryId = `fq-${queries.size + 1}`;
          queries.set(queryId, { plate, polls: 0 });
          return json(201, { statusCode: 201, body: { queryId, status: 'PROCESSING' } });
        }
        const queryId = decodeURIComponent(req.url!.split('/').pop()!);
        const q = queries.get(queryId);
        if (!q) return json(404, { statusCode: 404, error: { code: 'QUERY_NOT_FOUND', message: 'no such query' } });
        q.polls++;
        if (q.polls === 1) {
          broken++;
          return res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(`{"statusCode":200,"body":{"queryId":"${queryId}","stat`);
        }
        if (q.polls === 2) {
          broken++;
          return res
            .writeHead(200, { 'content-type': 'text/html' })
            .end('<html><body>upstream maintenance</body></html>');
        }
        return json(200, { statusCode: 200, body: { queryId, status: 'COMPLETED', vehicle: { plate: q.plate } } });
      });
    });
    const h = await harness.start({ label: 'brokenpoll', workers: 2, config: { VQ_BASE_URL: url, VQ_ATTEMPTS: '6' } });
    const plates = [...makePlates(40, 77_000), HTML_CREATE];
    await h.enqueue('b', plates);
    await h.waitForBatch('b', 60_000);

    const info = await h.services.batchViews.get('b');
    expect(info.counts).toMatchObject({ enqueued: 41, done: 40, failed: 1, possibleDuplicates: 0 });
    expect(broken).toBe(80);
    expect(
      [...createsByPlate.values()].every((n) => n === 1),
      'every plate created exactly once',
    ).toBe(true);
    expect(createsByPlate.size).toBe(41);
    const idOf = new Map([...queries].map(([id, q]) => [q.plate, id]));
    for (const plate of plates.slice(0, 40)) {
      const o = await h.services.outcomes.get(await h.services.batches.ref('b'), plate);
      expect(o?.status, plate).toBe('done');
      expect(o?.queryId).toBe(idOf.get(plate));
      expect((o?.result as { vehicle?: { plate?: string } } | undefined)?.vehicle?.plate).toBe(plate);
    }
    const html = await h.services.outcomes.get(await h.services.batches.ref('b'), HTML_CREATE);
    expect(html?.status).toBe('failed');
    expect(html?.error?.code).toBe('BAD_RESPONSE');
    expect(html?.error?.message).toMatch(/not JSON: <html>/);
  }, 60_000);
});

describe('an unusable output directory', () => {
  const exportIntoFile = async () => {
    const h = await harness.start({ label: 'outdir', workers: 0 });
    await h.enqueue('b', makePlates(3));
    const notADir = join(h.config.outDir, '..', 'not-a-dir');
    await writeFile(notADir, 'x');
    const r = await vqb(h, ['export', 'b'], { VQ_OUT_DIR: notADir });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^vqb: /);
    expect(r.stderr).toContain(notADir);
    expect(await readFile(notADir, 'utf8')).toBe('x');
    return r;
  };

  it('`vqb export` into a path that is a regular file fails with exit 1, naming it, touching nothing', async () => {
    await exportIntoFile();
  });

  // Was a bug: the raw EEXIST from mkdir came out with a stack trace; file-system failures of an
  // export are now EXPORT_DIR_UNUSABLE, one line.
  it('… and says so in one readable line, without a stack trace', async () => {
    const r = await exportIntoFile();
    expect(r.stderr).not.toMatch(/unexpected error|\n\s+at /);
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  });
});
