// The newer surfaces, hardened against what an upstream or a tenant sends (docs/security.md, "The
// upstream is untrusted"): a watch round whose results grow a field named `constructor`, deadlines
// past the Date range through the API and the drop folder, a watch of the schema's maximum, and a
// pool asked for by a tenant who may not see it. Each test names the finding it replays.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createInboxWatcher } from '../../src/producers/inbox.js';
import { createHttpApi } from '../../src/server.js';
import { Watches } from '../../src/watch/watches.js';
import { type Harness, type HarnessOptions, makePlates, sleep, useHarness } from '../helpers/engine.js';
import { startHostileUpstream } from '../helpers/hostile-upstream.js';
import { apiCall, expectError } from '../helpers/http.js';
import { waitFor } from '../helpers/process.js';

const A = 'frota-token-0123456789abcdef';
const B = 'seguros-token-0123456789abcd';
const harness = useHarness();
const closing: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await c.close();
});

async function serve(options: HarnessOptions): Promise<{ h: Harness; base: string }> {
  const h = await harness.start(options);
  const app: FastifyInstance = await createHttpApi({
    services: h.services,
    config: h.config,
    logger: h.logs.logger,
    dashboard: false,
  });
  closing.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { h, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

describe('hostile input at the newer doors', () => {
  it('(1) a result field named constructor, toString, hasOwnProperty appears between rounds: compared, exported, process alive', async () => {
    let hostileRound = false;
    const upstream = await startHostileUpstream((r) => {
      if (!hostileRound || r.method !== 'GET') return undefined;
      const queryId = r.path.split('/').pop();
      return {
        status: 200,
        body: JSON.stringify({ queryId, status: 'COMPLETED', constructor: 'x', toString: 'y', hasOwnProperty: 'z' }),
      };
    });
    closing.push(upstream);
    const { h, base } = await serve({
      label: 'hostile-watch',
      accounts: [{ id: 'frota', tokens: [A] }],
      config: { VQ_BASE_URL: upstream.url, VQ_WATCH_MIN_EVERY: '1s', VQ_WATCH_SWEEP: '200ms' },
    });
    upstream.target = h.sim.url;
    await h.services.answers.learn('frota', { id: '/body/queryId', status: '/body/status' }, Date.now());
    const call = (path: string) => apiCall(base, A, path);
    const plates = makePlates(2);
    const made = await apiCall(base, A, '/v1/watches', { json: { name: 'w', plates, every: '1h' } });
    expect(made.status, made.text).toBe(201);
    const closed = (n: number) => async () =>
      (await call('/v1/watches/w')).json?.rounds?.find((r: { round: number }) => r.round === n)?.closedAt !== undefined;
    await waitFor(closed(1), 30_000, 'round 1');
    hostileRound = true;
    const watches = new Watches(h.services, h.logs.logger);
    try {
      await watches.rounds.fire({ account: 'frota', name: 'w' }, 'hostile-2');
    } finally {
      await watches.close();
    }
    await waitFor(closed(2), 30_000, 'round 2');
    const changes = await call('/v1/watches/w/changes?round=2&format=csv');
    expect(changes.status, changes.text).toBe(200);
    for (const field of ['constructor', 'toString', 'hasOwnProperty'])
      expect(changes.text).toMatch(new RegExp(`;${field};;[xyz];`));
    expect(changes.text).not.toMatch(/function|native code/);
    expect((await call('/healthz')).status, 'the process still serves').toBe(200);
  }, 90_000);

  it('(9) a deadline past the Date range: 400 BAD_DEADLINE from the API; a sidecar fails its file to failed/', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vqb-hostile-inbox-'));
    closing.push({ close: () => rm(root, { recursive: true, force: true }) });
    const { h, base } = await serve({
      label: 'hostile-deadline',
      workers: 0,
      config: { VQ_API_TOKENS: A, VQ_ROOT: root, VQ_INBOX_STABLE: '100ms', VQ_INBOX_POLL: '100ms' },
    });
    for (const deadline of ['99999999999d', 8_640_000_000_000_001])
      expectError(
        await apiCall(base, A, '/v1/batches', { json: { plates: makePlates(2), deadline } }),
        400,
        'BAD_DEADLINE',
      );
    const watcher = createInboxWatcher({ services: h.services, config: h.config, logger: h.logs.logger });
    closing.push({ close: () => watcher.stop() });
    await watcher.scanOnce();
    const inbox = join(root, 'inbox');
    await writeFile(join(inbox, 'far.csv.json'), JSON.stringify({ deadline: '99999999999d' }));
    await writeFile(join(inbox, 'far.csv'), `placa\r\n${makePlates(3).join('\r\n')}\r\n`);
    for (let i = 0; i < 30 && (await readdir(inbox)).length > 0; i++) {
      await sleep(150);
      await watcher.scanOnce();
    }
    expect(await readdir(join(root, 'processing'))).toEqual([]);
    const failed = await readdir(join(root, 'failed'));
    expect(failed).toContain('far.csv');
    const reasons = await Promise.all(
      failed.filter((n) => n.endsWith('.txt')).map((n) => readFile(join(root, 'failed', n), 'utf8')),
    );
    expect(reasons.join('\n')).toMatch(/BAD_DEADLINE/);
    expect((await h.services.batchViews.list()).total).toBe(0);
  }, 60_000);

  it('(10) a watch of 100,000 plates, the schema’s maximum: made whole and listed', async () => {
    const { base } = await serve({ label: 'hostile-bigwatch', workers: 0, accounts: [{ id: 'frota', tokens: [A] }] });
    const plates = makePlates(100_000);
    const made = await apiCall(base, A, '/v1/watches', { json: { name: 'all', plates, every: '24h' } });
    expect(made.status, made.text.slice(0, 500)).toBe(201);
    expect(made.json).toMatchObject({ name: 'all', plates: 100_000 });
    const list = await apiCall(base, A, '/v1/watches');
    expect(list.json.watches.map((w: { name: string; plates: number }) => [w.name, w.plates])).toEqual([
      ['all', 100_000],
    ]);
  }, 120_000);

  it('(11) POST /v1/watches with a pool the token cannot see: 404 naming no pool and no account', async () => {
    const { base } = await serve({
      label: 'hostile-pool',
      workers: 0,
      accounts: [
        { id: 'ka-secret', tokens: [B], fields: { pool: 'fleet-secret' } },
        { id: 'kb-secret', tokens: [B], fields: { pool: 'fleet-secret' } },
        { id: 'frota', tokens: [A] },
      ],
    });
    const plates = makePlates(2);
    for (const [pool, account] of [
      ['nope', undefined],
      ['fleet-secret', undefined],
      ['fleet-secret', 'frota'],
    ] as const) {
      const answer = await apiCall(base, A, '/v1/watches', {
        json: { name: 'x', plates, every: '1h', pool, ...(account ? { account } : {}) },
      });
      expectError(answer, 404, 'POOL_NOT_FOUND');
      expect(answer.json.error.message).toBe(`no pool ${JSON.stringify(pool)} for this token`);
      expect(answer.text).not.toMatch(/ka-secret|kb-secret|declared/);
    }
  }, 60_000);
});
