// Pools of keys through the front doors (docs/plans.md): the API's `pool` field and the console's
// upload form send a batch to a pool the token may use whole; an unknown pool, or one with a key
// the token may not see, is 404 POOL_NOT_FOUND and stores nothing. Real Redis, the HTTP API in-process.

import { readFile, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { signIn } from '../helpers/console.js';
import { type Harness, makePlates, startHarness } from '../helpers/engine.js';
import { apiCall } from '../helpers/http.js';
import { harnessEnv, runVqb } from '../helpers/process.js';

const ADMIN = 'admin-token-0123456789abcdef';
const TEAM = 'team-token-0123456789abcdef';
const OTHER = 'other-token-0123456789abcdef';
const ACCOUNTS = [
  { id: 'ka', tokens: [TEAM], fields: { pool: 'fleet' } },
  { id: 'kb', tokens: [TEAM], fields: { pool: 'fleet' } },
  { id: 'solo', tokens: [OTHER] },
];

let h: Harness | undefined;
let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
  await h?.close();
  h = undefined;
});

async function serve(): Promise<string> {
  h = await startHarness({ label: 'pool-doors', workers: 0, accounts: ACCOUNTS, config: { VQ_API_TOKENS: ADMIN } });
  app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger, dashboard: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

describe('pools of keys through the front doors', () => {
  it('POST /v1/batches with pool: the pool serves it; unknown, or not the token’s whole: 404 POOL_NOT_FOUND, nothing stored', async () => {
    const base = await serve();
    const made = await apiCall(base, TEAM, '/v1/batches', {
      method: 'POST',
      json: { plates: makePlates(3), pool: 'fleet' },
    });
    expect(made.status).toBe(202);
    const id = (made.json as { batch: { id: string } }).batch.id;
    const info = await h!.services.batchViews.get(id);
    expect(info.account).toBe('ka');
    expect(info.pool).toEqual({ name: 'fleet', keys: ['kb'] });
    for (const [token, pool] of [
      [TEAM, 'nope'],
      [OTHER, 'fleet'],
    ] as const) {
      const refused = await apiCall(base, token, '/v1/batches', {
        method: 'POST',
        json: { plates: makePlates(3, 100), pool },
      });
      expect(refused.status).toBe(404);
      expect((refused.json as { error: { code: string } }).error.code).toBe('POOL_NOT_FOUND');
    }
    expect((await h!.services.batches.refs(0, 10)).total).toBe(1);
    expect(h!.sim.stats().requests).toBe(0);
    // /healthz shows the pool to a token that sees it whole, not to another.
    const health = await apiCall(base, TEAM, '/healthz');
    expect((health.json as { pools?: { pool: string; keys: unknown[] }[] }).pools?.[0]).toMatchObject({
      pool: 'fleet',
      keys: [{ account: 'ka' }, { account: 'kb' }],
    });
    expect((await apiCall(base, OTHER, '/healthz')).json).not.toHaveProperty('pools');
  });

  it('the console’s upload form offers the pool, and a batch uploaded to it is the pool’s', async () => {
    const base = await serve();
    const session = await signIn(base, TEAM);
    const page = await (await fetch(`${base}/upload`, { headers: { cookie: session.cookie } })).text();
    expect(page).toMatch(/<select id="pool" name="pool">.*<option value="fleet">fleet<\/option>/s);
    const other = await signIn(base, OTHER);
    expect(await (await fetch(`${base}/upload`, { headers: { cookie: other.cookie } })).text()).not.toContain(
      'name="pool"',
    );
    const body = new FormData();
    body.append('csrf', session.csrf);
    body.append('pool', 'fleet');
    body.append('file', new Blob(['placa\nABC1D23\nXYZ9A87\n'], { type: 'text/csv' }), 'fleet.csv');
    const staged = await fetch(`${base}/upload`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: session.cookie },
      body,
    });
    expect(staged.status).toBe(303);
    const confirmed = await fetch(`${base}${staged.headers.get('location')}/confirm`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: session.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${session.csrf}`,
    });
    expect(confirmed.status).toBe(303);
    const id = decodeURIComponent(confirmed.headers.get('location')!.replace('/batches/', ''));
    expect((await h!.services.batchViews.get(id)).pool).toEqual({ name: 'fleet', keys: ['kb'] });
  });

  it("vqb run --pool: the keys of the pool serve the file and its export names each plate's key; an unknown pool is exit 2, nothing stored", async () => {
    await serve();
    for (const a of ACCOUNTS)
      await h!.services.answers.learn(a.id, { id: '/body/queryId', status: '/body/status' }, Date.now());
    const file = join(h!.config.outDir, '..', 'fleet.csv');
    await writeFile(file, `placa\n${makePlates(40).join('\n')}\n`);
    const unknown = await runVqb(['run', file, '--pool', 'nope'], harnessEnv(h!));
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no pool "nope"; declared: fleet');
    expect((await h!.services.batches.refs(0, 10)).total).toBe(0);
    const run = await runVqb(['run', file, '--pool', 'fleet'], harnessEnv(h!, { VQ_RATE_LIMIT: '10/s' }));
    expect(run.code, run.stderr).toBe(0);
    expect(h!.sim.stats().creates).toBe(40);
    const [batch] = (await h!.services.batchViews.list(0, 1)).batches;
    const jsonl = await readFile(join(h!.config.outDir, `${batch!.id}.jsonl`), 'utf8');
    const keys = jsonl
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { key?: string }).key);
    expect(keys).toHaveLength(40);
    expect(new Set(keys)).toEqual(new Set(['ka', 'kb']));
  });
});
