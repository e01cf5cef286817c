// The exposition itself, without Redis: standard Node.js names, promtool-clean, every account's
// limit next to its requests, and OpenMetrics for a scraper that asks for it.
import { describe, expect, it } from 'vitest';
import { parseAccounts } from '../../src/accounts/account.js';
import { Metrics, wantsOpenMetrics } from '../../src/metrics.js';
import { parseRateLimit } from '../../src/setting-values.js';
import { families, parseSamples, promtoolCheck, sumOf } from '../helpers/metrics.js';

const accounts = parseAccounts(
  JSON.stringify({
    accounts: [
      { id: 'fleet', rateLimit: '300/min' },
      { id: 'insurer', rateLimit: '20/s' },
    ],
  }),
  { baseUrl: 'http://upstream.test', product: 'agregados', rateLimit: parseRateLimit('60/min')! },
);

/** A registry after some work on both accounts, as a worker process would have it. */
function busy(): Metrics {
  const metrics = new Metrics({ accounts });
  metrics.request('fleet', 'create', 201);
  metrics.request('fleet', 'get', 200);
  metrics.request('insurer', 'create', 429);
  metrics.waited('insurer', 'rate_limit', 1_500);
  metrics.waited('fleet', 'budget', 60_000);
  metrics.quota('fleet', { limit: 300, remaining: 12, resetAt: 1_700_000_060_000, observedAt: 1_700_000_000_000 });
  metrics.finished('fleet', {
    batchId: 'b',
    plate: 'ABC1234',
    status: 'done',
    createdAt: 1_000,
    finishedAt: 4_000,
    requests: 3,
    polls: 2,
    attempts: 1,
  });
  metrics.webhook('batch.finished', 'retry');
  metrics.webhook('batch.finished', 'delivered');
  return metrics;
}

// What Prometheus sends (scrape_protocols' default order).
const PROMETHEUS_ACCEPT =
  'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';

describe('metrics exposition', () => {
  it('after work on both accounts, passes promtool check metrics with no findings', async () => {
    const { contentType, body } = await busy().render();
    expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await promtoolCheck(body)).toEqual({ ok: true, output: '' });
  });

  it('webhook deliveries are counted by event and result', async () => {
    const samples = parseSamples((await busy().render()).body);
    expect(sumOf(samples, 'vqb_webhook_deliveries_total', { event: 'batch.finished', result: 'delivered' })).toBe(1);
    expect(sumOf(samples, 'vqb_webhook_deliveries_total', { event: 'batch.finished', result: 'retry' })).toBe(1);
  });

  it('default Node.js metrics keep their standard names; no gauge ends in _total', async () => {
    const { body } = await busy().render();
    const types = families(body);
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
      'nodejs_gc_duration_seconds',
    ]) {
      expect(types.has(name), name).toBe(true);
    }
    expect(body).not.toContain('vqb_process_');
    const misnamed = [...types].filter(([name, type]) => type !== 'counter' && name.endsWith('_total'));
    expect(misnamed).toEqual([]);
  });

  it("every account's configured rate limit sits next to its requests, both labelled by account", async () => {
    const samples = parseSamples((await busy().render()).body);
    expect(sumOf(samples, 'vqb_account_rate_limit_requests_per_second', { account: 'fleet' })).toBe(5);
    expect(sumOf(samples, 'vqb_account_rate_limit_requests_per_second', { account: 'insurer' })).toBe(20);
    expect(sumOf(samples, 'vqb_upstream_requests_total', { account: 'fleet' })).toBe(2);
    expect(sumOf(samples, 'vqb_upstream_requests_total', { account: 'insurer', status: '429' })).toBe(1);
    expect(sumOf(samples, 'vqb_upstream_rate_limited_total', { account: 'insurer' })).toBe(1);
    expect(sumOf(samples, 'vqb_line_wait_seconds_total', { account: 'fleet', reason: 'budget' })).toBe(60);
    expect(sumOf(samples, 'vqb_plates_finished_total', { account: 'fleet', status: 'done' })).toBe(1);
    // The upstream's own rate-limit headers, named for what they are (the window's, not a daily quota).
    expect(sumOf(samples, 'vqb_upstream_ratelimit_limit', { account: 'fleet' })).toBe(300);
    expect(sumOf(samples, 'vqb_upstream_ratelimit_remaining', { account: 'fleet' })).toBe(12);
    expect(sumOf(samples, 'vqb_upstream_ratelimit_reset_timestamp_seconds', { account: 'fleet' })).toBe(1_700_000_060);
  });

  it('answers OpenMetrics when the scraper asks for it, and Prometheus text after it as before', async () => {
    const metrics = busy();
    const open = await metrics.render(PROMETHEUS_ACCEPT);
    expect(open.contentType).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
    expect(open.body.endsWith('\n# EOF\n')).toBe(true);
    // OpenMetrics names a counter's family without _total and its samples with it.
    expect(open.body).toContain('# TYPE vqb_upstream_requests counter');
    expect(sumOf(parseSamples(open.body), 'vqb_upstream_requests_total', { account: 'fleet' })).toBe(2);
    expect(families(open.body).get('process_cpu_seconds')).toBe('counter');

    // prom-client renames counters in place when a registry renders OpenMetrics: the next
    // Prometheus scrape must still see vqb_upstream_requests_total and lint clean.
    const text = await metrics.render('text/plain;version=0.0.4');
    expect(text.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(text.body).toContain('# TYPE vqb_upstream_requests_total counter');
    expect(await promtoolCheck(text.body)).toEqual({ ok: true, output: '' });
  });

  it('negotiates on the Accept header', () => {
    expect(wantsOpenMetrics(PROMETHEUS_ACCEPT)).toBe(true);
    expect(wantsOpenMetrics('application/openmetrics-text')).toBe(true);
    expect(wantsOpenMetrics(undefined)).toBe(false);
    expect(wantsOpenMetrics('*/*')).toBe(false);
    expect(wantsOpenMetrics('text/plain;version=0.0.4')).toBe(false);
    expect(wantsOpenMetrics('application/openmetrics-text;q=0,text/plain')).toBe(false);
    expect(wantsOpenMetrics('text/plain;q=0.9,application/openmetrics-text;q=0.5')).toBe(false);
  });
});
