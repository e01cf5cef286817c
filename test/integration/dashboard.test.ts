// Issue 47, 5: the Grafana dashboard kept in deploy/observability/ loads against what vqb exports.
// Every PromQL query of every panel names only metrics that /metrics really exports (a registry
// with the workers' counters and the queue-wide gauges read from Redis, as `vqb serve --workers`
// has it), each query parses (promtool check rules on them as recording rules), and the
// profile's prometheus.yml passes promtool check config.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.js';
import { ROOT } from '../helpers/browser.js';
import { useHarness } from '../helpers/engine.js';
import { families } from '../helpers/metrics.js';

const DIR = join(ROOT, 'deploy/observability');
const DASHBOARD = join(DIR, 'grafana/dashboards/vqb.json');

interface Panel {
  title: string;
  datasource?: { uid?: string };
  targets?: { expr?: string; refId?: string }[];
}

/** PromQL words that are not metric names (aggregations and functions are told by their "("). */
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or']);

/** The metric names a PromQL expression reads: its identifiers, less functions, keywords and label lists. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*(?!\s*\()/g)) {
    const name = match[0];
    const before = bare[match.index - 1];
    // A number's exponent (1e3) or the rest of a name the lookahead cut short ("rat" of "rate(").
    if (before !== undefined && /[0-9.]/.test(before)) continue;
    if (KEYWORDS.has(name)) continue;
    const after = bare.slice(match.index + name.length);
    if (/^[a-zA-Z0-9_:]/.test(after) || /^\s*\(/.test(after)) continue;
    names.add(name);
  }
  return [...names];
}

/** The series names an exposition offers: each family, and a histogram's or summary's parts. */
function exported(text: string): Set<string> {
  const names = new Set<string>();
  for (const [name, type] of families(text)) {
    names.add(name);
    if (type === 'histogram') for (const part of ['_bucket', '_sum', '_count']) names.add(name + part);
    if (type === 'summary') for (const part of ['_sum', '_count']) names.add(name + part);
  }
  return names;
}

async function promtool(args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn('promtool', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  return { code, output };
}

async function dashboardQueries(): Promise<{ panel: string; ref: string; expr: string }[]> {
  const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as { panels: Panel[] };
  return dashboard.panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({ panel: p.title, ref: t.refId ?? '?', expr: t.expr ?? '' })),
  );
}

const harness = useHarness();

describe('the observability profile (issue 47, 5)', () => {
  it('metricNames reads the names of a query, not its functions, labels or keywords', () => {
    expect(
      metricNames(
        '3600 * sum by (account) (rate(a_total{x="y{z}"}[5m]) * on (account) group_left max by (account) (b))',
      ).sort(),
    ).toEqual(['a_total', 'b']);
    expect(metricNames('histogram_quantile(0.99, sum by (le) (rate(c_bucket[5m]))) > 1e3')).toEqual(['c_bucket']);
  });

  it('every query of the dashboard names only metrics /metrics exports, and parses (promtool)', async () => {
    const h = await harness.start({ label: 'dashboard', workers: 0 });
    const metrics = new Metrics({ accounts: h.config.accounts });
    metrics.observeQueue(h.services);
    // Some work, so the workers' families have samples as well as their TYPE lines.
    metrics.request('default', 'create', 201);
    metrics.request('default', 'get', 429);
    const { body } = await metrics.render(undefined, { perBatch: false });
    const names = exported(body);
    expect(names.has('vqb_upstream_requests_total')).toBe(true);
    expect(names.has('vqb_queries_in_flight')).toBe(true);

    const queries = await dashboardQueries();
    expect(queries.length).toBeGreaterThan(10);
    const unknown: string[] = [];
    const used = new Set<string>();
    for (const q of queries) {
      const read = metricNames(q.expr);
      if (read.length === 0) unknown.push(`${q.panel} ${q.ref}: no metric in ${q.expr}`);
      for (const name of read) {
        used.add(name);
        if (!names.has(name)) unknown.push(`${q.panel} ${q.ref}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
    // What the issue asks the dashboard to show, each from its metric.
    for (const name of [
      'vqb_upstream_requests_total',
      'vqb_account_rate_limit_requests_per_second',
      'vqb_upstream_rate_limited_total',
      'vqb_queries_in_flight',
      'vqb_queue_jobs',
      'vqb_line_waiting',
      'vqb_account_price',
      'vqb_batches_at_risk',
    ])
      expect(used, name).toContain(name);

    // Each query parses: promtool checks them as recording rules.
    const dir = await mkdtemp(join(tmpdir(), 'vqb-dashboard-'));
    const rules = join(dir, 'rules.yml');
    const lines = ['groups:', '  - name: dashboard', '    rules:'];
    for (const [i, q] of queries.entries())
      lines.push(`      - record: dashboard:query_${i}`, `        expr: ${JSON.stringify(q.expr)}`);
    await writeFile(rules, `${lines.join('\n')}\n`);
    const checked = await promtool(['check', 'rules', rules]);
    expect(checked.output).toContain(`SUCCESS: ${queries.length} rules found`);
    expect(checked.code).toBe(0);
  });

  it('prometheus.yml passes promtool check config; the dashboard reads the provisioned data source', async () => {
    const checked = await promtool(['check', 'config', join(DIR, 'prometheus.yml')]);
    expect(checked.output).toContain('SUCCESS');
    expect(checked.code).toBe(0);
    const sources = await readFile(join(DIR, 'grafana/provisioning/datasources/vqb.yml'), 'utf8');
    const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as { panels: Panel[] };
    for (const panel of dashboard.panels) expect(sources).toContain(`uid: ${panel.datasource?.uid}`);
  });
});
