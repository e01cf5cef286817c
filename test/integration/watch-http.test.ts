// /v1/watches: a watch list over HTTP, tenant-scoped like batches. A token sees, changes and
// reads the changes of its own accounts' watches only; another account's answers 404, as if
// absent; bad input is a typed error in the API's shape.
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { Watches } from '../../src/watch/watches.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { apiCall, expectError } from '../helpers/http.js';
import { waitFor } from '../helpers/process.js';

const A = 'frota-token-0123456789abcdef';
const B = 'seguros-token-0123456789abcd';
const harness = useHarness();

describe('/v1/watches', () => {
  it('create, read, change, read the changes; another account sees nothing; bad input is typed', async () => {
    const h = await harness.start({
      label: 'watch-http',
      accounts: [
        { id: 'frota', tokens: [A] },
        { id: 'seguros', tokens: [B] },
      ],
      sim: { completionMs: [20, 60] },
      config: { VQ_WATCH_MIN_EVERY: '1s', VQ_WATCH_SWEEP: '200ms', VQ_RATE_LIMIT: '200/s' },
    });
    for (const id of ['frota', 'seguros'])
      await h.services.answers.learn(id, { id: '/body/queryId', status: '/body/status' }, Date.now());
    h.startWorker();
    const app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const call = (path: string, token: string, json?: unknown, method?: string) =>
      apiCall(base, token, path, { ...(json === undefined ? {} : { json }), ...(method ? { method } : {}) });
    try {
      const plates = makePlates(12);
      const made = await call('/v1/watches', A, { name: 'fleet', plates: [...plates, 'nope'], every: '1h' });
      expect(made.status, made.text).toBe(201);
      expect(made.json).toMatchObject({ name: 'fleet', account: 'frota', every: '1h', plates: 12, overlap: 'wait' });

      // Round 1 (fired now) records; round 2, started when the budget is raised, compares.
      const round = (n: number) => async () =>
        (await call('/v1/watches/fleet', A)).json?.rounds?.find((r: { round: number }) => r.round === n)?.closedAt !==
        undefined;
      await waitFor(round(1), 30_000, 'round 1');
      const shown = await call('/v1/watches/fleet', A);
      expect(shown.json.rounds[0]).toMatchObject({ round: 1, plates: 12, firstRecord: true, creates: 12 });
      expect((await call('/v1/watches', A)).json.watches.map((w: { name: string }) => w.name)).toEqual(['fleet']);

      await fetch(`${h.sim.url}/__admin/changes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ plates: plates.slice(0, 3) }),
      });
      // A month budget all spent (12 creates, round 1's) holds the next round; raising it starts it.
      expect((await call('/v1/watches/fleet', A, { perMonth: 12 }, 'PATCH')).json).toMatchObject({ perMonth: 12 });
      const watches = new Watches(h.services, h.logs.logger);
      try {
        await watches.rounds.fire({ account: 'frota', name: 'fleet' }, 'test-2');
      } finally {
        await watches.close();
      }
      const held = await call('/v1/watches/fleet', A);
      expect(held.json).toMatchObject({ state: 'held', round: 1 });
      expect(held.json.reason).toMatch(/month budget/);
      const raised = await call('/v1/watches/fleet', A, { perMonth: null }, 'PATCH');
      expect(raised.status, raised.text).toBe(200);
      await waitFor(round(2), 30_000, 'round 2');
      const changes = await call('/v1/watches/fleet/changes?round=2', A);
      expect(changes.status, changes.text).toBe(200);
      const lines = changes.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { plate: string; round: number });
      expect([...new Set(lines.map((l) => l.plate))].sort()).toEqual(plates.slice(0, 3).sort());
      const csv = await call('/v1/watches/fleet/changes?round=2&format=csv', A);
      expect(csv.headers.get('content-type')).toMatch(/text\/csv/);
      expect(csv.text).toMatch(/^\uFEFF?round;plate;field;before;after;at\r\n/);

      // The other account: as if absent, everywhere.
      expect((await call('/v1/watches', B)).json.watches).toEqual([]);
      expectError(await call('/v1/watches/fleet', B), 404, 'WATCH_NOT_FOUND');
      expectError(await call('/v1/watches/fleet/changes', B), 404, 'WATCH_NOT_FOUND');
      expectError(await call('/v1/watches/fleet/pause', B, {}), 404, 'WATCH_NOT_FOUND');
      expectError(await call('/v1/watches/fleet', B, undefined, 'DELETE'), 404, 'WATCH_NOT_FOUND');
      expectError(
        await call('/v1/watches', B, { name: 'x', plates, every: '1h', account: 'frota' }),
        404,
        'ACCOUNT_NOT_FOUND',
      );

      // Bad input, typed.
      expectError(await call('/v1/watches', A, { name: 'x', plates, every: 'soon' }), 422, 'WATCH_BAD_SCHEDULE');
      expectError(await call('/v1/watches', A, { name: 'x', plates, cron: '* * *' }), 422, 'WATCH_BAD_SCHEDULE');
      expectError(await call('/v1/watches', A, { name: 'x', plates, every: '1h', pool: 'p' }), 404, 'POOL_NOT_FOUND');
      expectError(await call('/v1/watches', A, { name: 'fleet', plates, every: '1h' }), 409, 'WATCH_EXISTS');
      expectError(await call('/v1/watches/nope', A), 404, 'WATCH_NOT_FOUND');
      expectError(await call('/v1/watches/fleet/changes?round=99', A), 404, 'WATCH_ROUND_NOT_FOUND');

      expect((await call('/v1/watches/fleet/pause', A, {})).json).toMatchObject({ paused: true, state: 'paused' });
      expect((await call('/v1/watches/fleet', A, undefined, 'DELETE')).status).toBe(204);
      expectError(await call('/v1/watches/fleet', A), 404, 'WATCH_NOT_FOUND');
    } finally {
      await app.close();
    }
  }, 80_000);
});
