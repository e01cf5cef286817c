// Issue 22, build 3: an upstream that cannot be reached is visible. `vqb work` (run in this
// process, main(argv, io)) talks to the simulator through a TCP proxy that cuts every connection,
// then lets them through again. After a few failed attempts: one warning line, the account's line
// in `vqb status`, /healthz and the metric say "unreachable since …"; when it answers again, one
// line says so and status says when it came back.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.js';
import { createHttpApi } from '../../src/server.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { harnessEnv, type InProcessVqb, runVqb, startVqb, waitFor } from '../helpers/process.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const harness = useHarness();
let proxy: TcpProxy | undefined;
let app: FastifyInstance | undefined;
let work: InProcessVqb | undefined;

afterEach(async () => {
  await work?.stop();
  work = undefined;
  await app?.close();
  await proxy?.close();
  app = undefined;
  proxy = undefined;
});

type Health = {
  status: string;
  accounts: {
    account: string;
    upstream: { state: string; since?: string; attempts?: number; reason?: string; backAt?: string };
  }[];
};

describe('an unreachable upstream is visible (issue 22)', () => {
  it('one warning, status, /healthz and the metric say since when; one line and status say when it came back', async () => {
    // /healthz shows the accounts' lines to a token's holder (a probe without one sees up or down).
    const token = 'unreach-token-0123456789abcdef';
    const h = await harness.start({ label: 'unreach', workers: 0, config: { VQ_API_TOKENS: token } });
    const withToken = { headers: { authorization: `Bearer ${token}` } };
    proxy = await startTcpProxy(Number(new URL(h.sim.url).port));
    proxy.set('cut');
    const env = harnessEnv(h, { VQ_BASE_URL: `http://127.0.0.1:${proxy.port}`, LOG_LEVEL: 'info' });
    // `vqb work` in this process: its logs are its stderr (startVqb's output()).
    work = startVqb(['work'], env);
    const running = work;
    const logs = () => running.output().stderr;
    // The queue-wide gauges, as `vqb serve` registers them.
    const metrics = new Metrics({ accounts: h.config.accounts });
    metrics.observeQueue(h.services);
    app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger, metrics });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const metric = async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      return /^vqb_line_waiting\{account="default",reason="upstream_unreachable"\} (\d)$/m.exec(text)?.[1];
    };

    await h.enqueue('unreach', makePlates(3));
    await waitFor(async () => logs().includes('upstream unreachable since'), 30_000, 'the warning');
    const warnings = logs()
      .split('\n')
      .filter((l) => l.includes('"event":"upstream.unreachable"'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; attempts: number; reason: string });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, attempts: 3, reason: 'connection reset' });
    expect(warnings[0]!.msg).toMatch(
      /^upstream unreachable since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: connection reset; retrying, attempt 3$/,
    );

    const status = await runVqb(['status'], harnessEnv(h));
    expect(status.stdout).toMatch(
      /^account default \(.*\): upstream unreachable since .* UTC \(\d+ s\): connection reset; retrying \(attempt \d+\)$/m,
    );
    const health = (await (await fetch(`${base}/healthz`, withToken)).json()) as Health;
    expect(health.status).toBe('degraded');
    expect(health.accounts[0]!.upstream).toMatchObject({ state: 'unreachable', reason: 'connection reset' });
    expect(health.accounts[0]!.upstream.attempts).toBeGreaterThanOrEqual(3);
    await waitFor(async () => (await metric()) === '1', 10_000, 'the metric at 1');

    // The upstream answers again: one line, the batch finishes, status says when it came back.
    proxy.set('pass');
    await waitFor(async () => logs().includes('upstream reachable again'), 60_000, 'the recovery line');
    expect(
      logs()
        .split('\n')
        .filter((l) => l.includes('"event":"upstream.reachable"')),
    ).toHaveLength(1);
    await waitFor(
      async () => (await h.services.batchViews.get('unreach')).finishedAt !== undefined,
      60_000,
      'the batch finished',
    );
    const after = await runVqb(['status'], harnessEnv(h));
    // Nothing left to do: the account is idle, not "running" (issue 46, 13).
    expect(after.stdout).toMatch(/^account default \(.*\): idle \(nothing queued\)$/m);
    expect(after.stdout).toMatch(
      /^ {2}upstream reachable again since .* UTC \((just now|.* ago); it was unreachable .*: connection reset\)$/m,
    );
    const healthy = (await (await fetch(`${base}/healthz`, withToken)).json()) as Health;
    expect(healthy.status).toBe('ok');
    expect(healthy.accounts[0]!.upstream).toMatchObject({ state: 'ok', reason: 'connection reset' });
    expect(healthy.accounts[0]!.upstream.backAt).toBeDefined();
    expect(await metric()).toBe('0');
    expect((await running.stop()).code).toBe(0);
    work = undefined;
  }, 150_000);
});
