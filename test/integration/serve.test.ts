// `vqb serve` as deployed: a real process with the API, the dashboard, /metrics and workers.
import type { ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { makePlates, useHarness } from '../helpers/engine.js';
import { families, parseSamples, promtoolCheck, sumOf } from '../helpers/metrics.js';
import { answering, freePort, harnessEnv, spawnVqb } from '../helpers/process.js';

const TOKEN = 'serve-test-token-0123456789';
const harness = useHarness();
let child: ChildProcess | undefined;
afterEach(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  child = undefined;
});

describe('vqb serve', () => {
  it('dashboard behind the token, /metrics moving during a batch, clean exit on SIGTERM', async () => {
    const h = await harness.start({ label: 'serve', workers: 0 });
    const port = await freePort();
    const serve = spawnVqb(
      ['serve', '--workers', '--no-inbox'],
      harnessEnv(h, { VQ_HTTP_PORT: String(port), VQ_API_TOKENS: TOKEN }),
    );
    child = serve.child;
    const base = `http://127.0.0.1:${port}`;
    // Until it answers (the helper's bound is against a hang; a loaded CI machine took over 10 s).
    await answering(base, serve);
    const auth = { authorization: `Bearer ${TOKEN}` };
    // The web console is served at /: a browser without a session is sent to sign in.
    const front = await fetch(`${base}/`, { redirect: 'manual' });
    expect({ status: front.status, location: front.headers.get('location') }).toEqual({
      status: 303,
      location: '/sign-in',
    });
    expect(await (await fetch(`${base}/sign-in`)).text()).toContain('name="token"');
    const denied = await fetch(`${base}/admin/queues`);
    expect(denied.status).toBe(401);
    expect(await denied.json()).toMatchObject({ statusCode: 401, error: { code: 'UNAUTHORIZED' } });
    const board = await fetch(`${base}/admin/queues`, { headers: auth });
    expect(board.status).toBe(200);
    expect(await board.text()).toContain('<html');
    const boardApi = await fetch(`${base}/admin/queues/api/queues`, { headers: auth });
    expect(boardApi.status).toBe(200);

    const before = await (await fetch(`${base}/metrics`)).text();
    const posted = await fetch(`${base}/v1/batches`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ plates: makePlates(40) }),
    });
    expect(posted.status).toBe(202);
    const { batch } = (await posted.json()) as { batch: { id: string } };
    // Its finish heard from Redis (the server shares the harness's prefix): a batch not finished in
    // 30 s fails here, naming its counts, rather than reaching the metrics' counts unfinished.
    await h.waitForBatch(batch.id, 30_000);
    const view = await fetch(`${base}/v1/batches/${batch.id}`, { headers: auth });
    expect(((await view.json()) as { finished: boolean }).finished).toBe(true);
    const after = await (await fetch(`${base}/metrics`)).text();
    expect(await promtoolCheck(after)).toEqual({ ok: true, output: '' });
    const creates = { account: 'default', operation: 'create', status: '201' };
    expect(sumOf(parseSamples(before), 'vqb_upstream_requests_total', creates)).toBe(0);
    const samples = parseSamples(after);
    expect(sumOf(samples, 'vqb_upstream_requests_total', creates)).toBe(40);
    expect(sumOf(samples, 'vqb_plates_finished_total', { account: 'default', status: 'done' })).toBe(40);
    expect(sumOf(samples, 'vqb_batches', { state: 'finished' })).toBe(1);
    expect(sumOf(samples, 'vqb_account_creates_used', { account: 'default', period: 'day' })).toBe(40);
    expect(after).toContain('vqb_queue_jobs{account="default",state="delayed"}');
    const open = await fetch(`${base}/metrics`, { headers: { accept: 'application/openmetrics-text; version=1.0.0' } });
    expect(open.headers.get('content-type')).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
    const openText = await open.text();
    expect(openText.endsWith('\n# EOF\n')).toBe(true);
    expect(families(openText).get('vqb_upstream_requests')).toBe('counter');

    child.kill('SIGTERM');
    const { code, stderr } = await serve.done;
    expect(code).toBe(0);
    expect(stderr).not.toContain(TOKEN);
  }, 60_000);
});
