// Prometheus metrics from a worker process, scraped over HTTP while a batch runs.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makePlates, sleep, startHarness, type Harness } from '../helpers/engine.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series));
  return line ? Number(line.slice(series.length).trim()) : 0;
}

describe('metrics', () => {
  it('vqb work --metrics-port: counters move while a batch runs', async () => {
    h = await startHarness({ label: 'metrics', workers: 0, sim: { completionMs: [200, 400], rateLimit: '30/s', window: 'fixed' }, config: { VQ_RATE_LIMIT: '60/s' } });
    await h.enqueue('b', makePlates(60));
    const port = await freePort();
    const child = spawn(process.execPath, [resolve(import.meta.dirname, '../../bin/vqb.js'), 'work', '--metrics-port', String(port)], {
      env: {
        PATH: process.env.PATH,
        REDIS_URL: h.config.redisUrl,
        VQ_PREFIX: h.config.prefix,
        VQ_BASE_URL: h.sim.url,
        VQ_API_KEY_FILE: h.keyFile,
        VQ_RATE_LIMIT: '60/s',
        VQ_POLL_INITIAL: '300ms',
        LOG_LEVEL: 'warn',
      },
      stdio: 'ignore',
    });
    try {
      const scrape = async () => {
        for (let i = 0; i < 50; i++) {
          try {
            return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
          } catch {
            await sleep(100);
          }
        }
        throw new Error('metrics endpoint never answered');
      };
      const early = await scrape();
      await h.waitForBatch('b', 60_000);
      const late = await scrape();
      const creates = 'vqb_upstream_requests_total{operation="create",status="201"}';
      expect(value(late, creates)).toBe(60);
      expect(value(late, creates)).toBeGreaterThan(value(early, creates));
      expect(value(late, 'vqb_plates_finished_total{status="done"}')).toBe(60);
      expect(value(late, 'vqb_upstream_requests_per_plate_count')).toBe(60);
      // The simulator's fixed window at half our rate: 429s or budget waits must show up.
      expect(value(late, 'vqb_line_wait_seconds_total{reason="rate_limit"}')).toBeGreaterThan(0);
      expect(late).toContain('vqb_upstream_quota_remaining');
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  }, 90_000);
});
