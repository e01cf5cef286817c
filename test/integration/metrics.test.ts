// Prometheus metrics from a worker process, scraped over HTTP while a batch runs.
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { makePlates, sleep, useHarness } from '../helpers/engine.js';
import { freePort, harnessEnv, spawnVqb } from '../helpers/process.js';

const harness = useHarness();

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series));
  return line ? Number(line.slice(series.length).trim()) : 0;
}

describe('metrics', () => {
  it('vqb work --metrics-port: counters move while a batch runs', async () => {
    const h = await harness.start({ label: 'metrics', workers: 0, sim: { completionMs: [200, 400], rateLimit: '30/s', window: 'fixed' }, config: { VQ_RATE_LIMIT: '60/s' } });
    await h.enqueue('b', makePlates(60));
    const port = await freePort();
    const { child } = spawnVqb(['work', '--metrics-port', String(port)], harnessEnv(h, { VQ_RATE_LIMIT: '60/s' }));
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
