// Prometheus metrics while batches run: a worker process's /metrics scraped over HTTP (linted by
// promtool, in both formats), and what an operator's dashboard reads from the metrics alone.
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.js';
import { startWorker } from '../../workers/worker.js';
import { makePlates, sleep, useHarness } from '../helpers/engine.js';
import { families, parseSamples, promtoolCheck, type Sample, sumOf } from '../helpers/metrics.js';
import { freePort, harnessEnv, startVqb, waitFor } from '../helpers/process.js';

const harness = useHarness();

describe('metrics', () => {
  it('vqb work --metrics-port: counters move while a batch runs; promtool finds nothing; OpenMetrics on request', async () => {
    const h = await harness.start({
      label: 'metrics',
      workers: 0,
      sim: { completionMs: [200, 400], rateLimit: '30/s', window: 'fixed' },
      config: { VQ_RATE_LIMIT: '60/s' },
    });
    await h.enqueue('b', makePlates(60));
    const port = await freePort();
    // `vqb work` in this process (main(argv, io)): its metrics registry is its own.
    const work = startVqb(['work', '--metrics-port', String(port)], harnessEnv(h, { VQ_RATE_LIMIT: '60/s' }));
    try {
      const scrape = async (accept?: string) => {
        for (let i = 0; i < 50; i++) {
          try {
            const res = await fetch(`http://127.0.0.1:${port}/metrics`, accept ? { headers: { accept } } : {});
            return { contentType: res.headers.get('content-type'), text: await res.text() };
          } catch {
            await sleep(100);
          }
        }
        throw new Error('metrics endpoint never answered');
      };
      const early = parseSamples((await scrape()).text);
      await h.waitForBatch('b', 60_000);
      const open = await scrape('application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5');
      const { contentType, text } = await scrape();

      expect(await promtoolCheck(text)).toEqual({ ok: true, output: '' });
      expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
      const late = parseSamples(text);
      const creates = { account: 'default', operation: 'create', status: '201' };
      expect(sumOf(late, 'vqb_upstream_requests_total', creates)).toBe(60);
      expect(sumOf(late, 'vqb_upstream_requests_total', creates)).toBeGreaterThan(
        sumOf(early, 'vqb_upstream_requests_total', creates),
      );
      expect(sumOf(late, 'vqb_plates_finished_total', { account: 'default', status: 'done' })).toBe(60);
      expect(sumOf(late, 'vqb_upstream_requests_per_plate_count')).toBe(60);
      // The simulator's fixed window at half our rate: 429s or budget waits must show up.
      expect(sumOf(late, 'vqb_line_wait_seconds_total', { account: 'default', reason: 'rate_limit' })).toBeGreaterThan(
        0,
      );
      expect(sumOf(late, 'vqb_upstream_ratelimit_limit', { account: 'default' })).toBe(30);
      // The rate in force: 60/s configured, refused by the upstream (30 per fixed second), so followed below it, learned from the 429s.
      const inForce = sumOf(late, 'vqb_account_rate_limit_requests_per_second', {
        account: 'default',
        source: 'learned',
      });
      expect(inForce).toBeGreaterThan(0);
      expect(inForce).toBeLessThan(60);
      expect(families(text).get('process_cpu_seconds_total')).toBe('counter');

      expect(open.contentType).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
      expect(open.text.endsWith('\n# EOF\n')).toBe(true);
      expect(families(open.text).get('vqb_upstream_requests')).toBe('counter');
      expect(sumOf(parseSamples(open.text), 'vqb_upstream_requests_total', creates)).toBe(60);
    } finally {
      await work.stop();
    }
  }, 90_000);

  it('rate vs limit, daily cap use and batch progress, read from the metrics alone', async () => {
    const h = await harness.start({
      label: 'metrics-read',
      workers: 0,
      sim: { completionMs: [200, 400] },
      accounts: [
        { id: 'fleet', rateLimit: '20/s' },
        { id: 'capped', rateLimit: '20/s', maxCreatesPerDay: 10 },
      ],
    });
    // What `vqb serve --workers` builds: the workers' counters and the queue-wide gauges in one registry.
    const metrics = new Metrics({ accounts: h.config.accounts });
    metrics.observeQueue(h.services);
    h.workers.push(startWorker(h.config, { logger: h.logs.logger, metrics }));
    const scrape = async () => ({ samples: parseSamples((await metrics.render()).body) });
    const requests = (s: { samples: Sample[] }) =>
      sumOf(s.samples, 'vqb_upstream_requests_total', { account: 'fleet' });

    await h.enqueue('fleet-batch', makePlates(120), { account: 'fleet' });
    await h.enqueue('capped-batch', makePlates(15, 5_000), { account: 'capped' });
    let first = await scrape();
    await waitFor(async () => requests((first = await scrape())) >= 10, 20_000, 'fleet requests');
    await sleep(2_000);
    const second = await scrape();

    // Rate vs limit: sum by (account) (rate(vqb_upstream_requests_total[…])) / vqb_account_rate_limit_requests_per_second.
    // Its two parts are checked: the limit, and a counter that moves while the batch runs and, at
    // the end, holds every request the upstream saw from the account's key. How near the limit a
    // key runs is a rate on the wall clock: the bench's.
    const limit = sumOf(second.samples, 'vqb_account_rate_limit_requests_per_second', { account: 'fleet' });
    expect(limit).toBe(20);
    expect(requests(second)).toBeGreaterThan(requests(first));

    // Batch progress while it runs: finished / enqueued of the batch.
    const during = { batch: 'fleet-batch', account: 'fleet' };
    expect(sumOf(second.samples, 'vqb_batch_plates_enqueued', during)).toBe(120);
    const finished = sumOf(second.samples, 'vqb_batch_plates_finished', during);
    expect(finished).toBeGreaterThan(0);
    expect(finished).toBeLessThan(120);

    // The capped account: 10 creates today of a cap of 10, its line waiting on the budget, its batch at 10 of 15.
    await h.waitForBatch('fleet-batch', 60_000);
    let late = await scrape();
    await waitFor(
      async () => {
        late = await scrape();
        return sumOf(late.samples, 'vqb_batch_plates_finished', { batch: 'capped-batch' }) === 10;
      },
      20_000,
      'capped batch at its cap',
    );
    const capped = { account: 'capped', period: 'day' };
    const dailyUse =
      sumOf(late.samples, 'vqb_account_creates_used', capped) / sumOf(late.samples, 'vqb_account_creates_cap', capped);
    expect(dailyUse).toBe(1);
    expect(sumOf(late.samples, 'vqb_account_creates_used', { account: 'capped', period: 'month' })).toBe(10);
    expect(late.samples.filter((s) => s.name === 'vqb_account_creates_cap' && s.labels.period === 'month')).toEqual([]);
    expect(sumOf(late.samples, 'vqb_account_creates_used', { account: 'fleet', period: 'day' })).toBe(120);
    const seen = h.sim.stats().byKey.fleet!;
    expect(requests(late), "the fleet key's requests, as the upstream saw them").toBe(seen.counted + seen.rateLimited);
    expect(sumOf(late.samples, 'vqb_line_waiting', { account: 'capped', reason: 'budget' })).toBe(1);
    expect(sumOf(late.samples, 'vqb_line_waiting', { account: 'fleet' })).toBe(0);
    expect(
      sumOf(late.samples, 'vqb_line_wait_end_timestamp_seconds', { account: 'capped', reason: 'budget' }),
    ).toBeGreaterThan(Date.now() / 1_000);
    const held = { batch: 'capped-batch', account: 'capped' };
    expect(sumOf(late.samples, 'vqb_batch_plates_enqueued', held)).toBe(15);
    expect(sumOf(late.samples, 'vqb_batch_plates_failed', held)).toBe(0);
    // A finished batch leaves the progress gauges (they cover unfinished batches) and counts as finished.
    expect(late.samples.filter((s) => s.labels.batch === 'fleet-batch')).toEqual([]);
    expect(sumOf(late.samples, 'vqb_batches', { state: 'finished' })).toBe(1);
    expect(sumOf(late.samples, 'vqb_batches', { state: 'running' })).toBe(1);
  }, 90_000);
});
