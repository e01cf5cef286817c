// The API key never leaves the process that sends it. A batch runs through real `vqb` processes with
// a distinctive key, behind an upstream that echoes the key back in error answers (as misconfigured
// proxies and some APIs do); afterwards the key is searched for in everything the run left behind:
// the output of every process, every Redis key and value under the test prefix (BullMQ's job
// hashes, failed reasons, stack traces and event streams included), the exports, and the stored
// error messages of failed plates.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Outcome } from '../../src/queue/types.js';
import { canaryNeedles, findIn, type Leak, scanDir, scanRedis } from '../chaos/leaks.js';
import { type Harness, makePlates, startHarness } from '../helpers/engine.js';
import { spawnVqb } from '../helpers/process.js';

let h: Harness | undefined;
let proxy: Server | undefined;
afterEach(async () => {
  proxy?.closeAllConnections();
  await new Promise((r) => (proxy ? proxy.close(r) : r(undefined)));
  proxy = undefined;
  await h?.close();
  h = undefined;
});

interface Output {
  name: string;
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `vqb` spawned with only these settings: all a process prints, logs included, is searched for the key. */
async function vqb(h: Harness, name: string, args: string[], env: Record<string, string>): Promise<Output> {
  const { code, stdout, stderr } = await spawnVqb(
    args,
    {
      PATH: process.env.PATH ?? '',
      REDIS_URL: h.config.redisUrl,
      VQ_PREFIX: h.config.prefix,
      VQ_OUT_DIR: h.config.outDir,
      ...env,
    },
    45_000,
  ).done;
  return { name, code, stdout, stderr };
}

/**
 * In front of the simulator: forwards everything, except that some answers quote the request's key
 * back — a 400 for one plate, a 502 HTML page once for another, a 200 that is not JSON for a third,
 * and a 503 for the first poll of every fifth query.
 */
async function echoingUpstream(simUrl: string): Promise<{ url: string; echoes: () => number }> {
  let echoes = 0;
  let polls = 0;
  const seen502 = new Set<string>();
  proxy = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const key = String(req.headers['x-api-key'] ?? '');
      const plate = /"licensePlate":"([A-Z0-9]+)"/.exec(body)?.[1];
      const echo = (status: number, type: string, text: string) => {
        echoes++;
        res.writeHead(status, { 'content-type': type }).end(text);
      };
      if (plate === 'ECH0A01')
        return echo(
          400,
          'application/json',
          JSON.stringify({
            statusCode: 400,
            error: { code: 'INVALID_PLATE', message: `plate refused for key ${key}` },
          }),
        );
      if (plate === 'ECH0A02' && !seen502.has(plate)) {
        seen502.add(plate);
        return echo(502, 'text/html', `<html><body><h1>502</h1><pre>x-api-key: ${key}</pre></body></html>`);
      }
      if (plate === 'ECH0A03') return echo(200, 'text/plain', `debug: accepted with x-api-key=${key}`);
      if (req.method === 'GET' && ++polls % 5 === 1)
        return echo(
          503,
          'application/json',
          JSON.stringify({
            statusCode: 503,
            error: { code: 'UNAVAILABLE', message: `maintenance; key ${key} is fine` },
          }),
        );
      fetch(simUrl + req.url, {
        method: req.method!,
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        ...(req.method === 'POST' ? { body } : {}),
      }).then(
        async (up) => {
          const headers: Record<string, string> = {
            'content-type': up.headers.get('content-type') ?? 'application/json',
          };
          for (const [name, value] of up.headers)
            if (name.startsWith('x-ratelimit') || name === 'retry-after') headers[name] = value;
          res.writeHead(up.status, headers).end(await up.text());
        },
        () => res.socket?.destroy(),
      );
    });
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  return { url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, echoes: () => echoes };
}

describe('the API key is never stored, logged or exported', () => {
  it('after a batch through `vqb run`, `vqb export` and `vqb status`, with an upstream that echoes the key', async () => {
    const key = `sk-live-SECRET-canary-${randomBytes(8).toString('hex')}`;
    const inlineKey = `sk-live-SECRET-canary-${randomBytes(8).toString('hex')}`;
    const needles = [...canaryNeedles(key), ...canaryNeedles(inlineKey)];
    h = await startHarness({
      label: 'secrets',
      workers: 0,
      sim: { keys: [{ key }, { key: inlineKey }], failPlates: ['FAI1L00'] },
    });
    await writeFile(h.keyFile, `${key}\n`);
    const upstream = await echoingUpstream(h.sim.url);
    const env = {
      VQ_BASE_URL: upstream.url,
      VQ_API_KEY_FILE: h.keyFile,
      VQ_RATE_LIMIT: '100/s',
      VQ_POLL_INITIAL: '300ms',
      VQ_POLL_INTERVAL: '150ms',
      VQ_BACKOFF: '100ms',
      LOG_LEVEL: 'trace',
    };
    const plates = [...makePlates(25, 91_000), 'ECH0A01', 'ECH0A02', 'ECH0A03', 'FAI1L00'];
    const file = join(h.config.outDir, '..', 'frota.csv');
    await writeFile(file, `placa;obs\n${plates.map((p, i) => `${p};linha ${i}`).join('\n')}\n`);

    const outputs: Output[] = [];
    const run = await vqb(h, 'run', ['run', file], env);
    outputs.push(run);
    expect(run.code, run.stderr.slice(-2_000)).toBe(0);
    const batchId = /batch (frota-[0-9a-f]{12})/.exec(run.stdout)![1]!;
    outputs.push(await vqb(h, 'export', ['export', batchId, '--json'], env));
    outputs.push(await vqb(h, 'status', ['status', batchId, '--json'], env));
    // The key given inline instead of in a file: a second small batch, and a command that fails on
    // a setting (its one-line error must not quote the environment).
    const inlineEnv: Record<string, string> = { ...env, VQ_API_KEY: inlineKey };
    delete inlineEnv.VQ_API_KEY_FILE;
    const small = join(h.config.outDir, '..', 'small.csv');
    await writeFile(small, `placa\n${makePlates(3, 92_000).join('\n')}\nECH0A01\n`);
    outputs.push(await vqb(h, 'run-inline', ['run', small], inlineEnv));
    expect(outputs.at(-1)!.code, outputs.at(-1)!.stderr.slice(-2_000)).toBe(0);
    outputs.push(await vqb(h, 'bad-setting', ['status'], { ...inlineEnv, VQ_RATE_LIMIT: 'fast' }));
    expect(outputs.at(-1)!.code).toBe(2);
    outputs.push(await vqb(h, 'both-keys', ['status'], { ...inlineEnv, VQ_API_KEY_FILE: h.keyFile }));
    expect(outputs.at(-1)!.code).toBe(2);

    // The run really met the echoes, failed plates and logged at trace level: the search has material.
    expect(upstream.echoes()).toBeGreaterThanOrEqual(8);
    const failed: Outcome[] = [];
    for await (const o of h.services.outcomes.scan(await h.services.batches.ref(batchId)))
      if (o.status === 'failed') failed.push(o);
    expect(failed.map((o) => `${o.plate} ${o.error?.code}`).sort()).toEqual([
      'ECH0A01 INVALID_PLATE',
      'ECH0A03 BAD_RESPONSE',
      'FAI1L00 VEHICLE_NOT_FOUND',
    ]);
    expect(
      failed.find((o) => o.plate === 'ECH0A01')?.error?.message,
      'the echoed key reached the client and was scrubbed',
    ).toBe('plate refused for key [redacted]');
    expect(run.stderr.match(/"msg":"plate failed"/g), 'the logs cover the failures').toHaveLength(3);

    const leaks: Leak[] = [];
    for (const o of outputs) leaks.push(...findIn(`${o.stdout}\n${o.stderr}`, needles, `output of vqb ${o.name}`));
    const redis = await scanRedis(h.redis.redis, h.config.prefix, needles);
    expect(redis.byType.stream, 'BullMQ event streams are searched').toBeGreaterThan(0);
    expect(redis.byType.hash).toBeGreaterThan(5);
    leaks.push(...redis.leaks);
    const files = await scanDir(h.config.outDir, needles);
    expect(files.files).toBeGreaterThanOrEqual(6);
    leaks.push(...files.leaks);
    for (const o of failed) leaks.push(...findIn(JSON.stringify(o.error), needles, `error of failed plate ${o.plate}`));
    expect(leaks).toEqual([]);
  }, 90_000);

  it('the search itself finds a planted key in a stream, a hash field, a key name, a file and a log line', async () => {
    h = await startHarness({ label: 'plant', workers: 0 });
    const key = `sk-live-SECRET-canary-${randomBytes(8).toString('hex')}`;
    const needles = canaryNeedles(key);
    const r = h.redis.redis;
    await r.xadd(`${h.config.prefix}:events`, '*', 'failedReason', `oops ${key.slice(-16)}`);
    await r.hset(`${h.config.prefix}:job`, 'data', JSON.stringify({ key }));
    await r.set(`${h.config.prefix}:${key}`, '1');
    await writeFile(join(h.keyFile, '..', 'out.txt'), `x ${key} y`);
    const redis = await scanRedis(r, h.config.prefix, needles);
    expect([...new Set(redis.leaks.map((l) => l.where.split(' ').slice(0, 2).join(' ')))].sort()).toEqual([
      'redis hash',
      'redis key',
      'redis stream',
    ]);
    const files = await scanDir(join(h.keyFile, '..'), needles);
    expect(files.leaks.map((l) => l.where)).toEqual([
      expect.stringMatching(/out\.txt$/),
      expect.stringMatching(/out\.txt$/),
    ]);
    expect(findIn(`{"msg":"x","key":"${key}"}`, needles, 'log')).toHaveLength(2);
  });
});
