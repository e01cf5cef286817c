// Two accounts of one `vqb serve` attacking each other through the HTTP API, as the security review
// did (issue 35, findings 1 and 4): the same plates, an id the other named first, a callbackUrl
// sent again, reuse across accounts. A batch id is scoped by its account; results stay in theirs.
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { apiCall } from '../helpers/http.js';
import { waitFor } from '../helpers/process.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

const ADMIN = 'admin-token-0123456789abcdef';
const A = 'frota-token-0123456789abcdef';
const B = 'seguros-token-0123456789abcd';
const SECRET = `whsec_${Buffer.from('tenant-isolation-secret-0123456789').toString('base64')}`;

const harness = useHarness();

async function api(accounts: { id: string; tokens: string[]; shareResults?: boolean }[], config = {}) {
  const h = await harness.start({
    label: 'tenants',
    accounts,
    config: {
      VQ_API_TOKENS: ADMIN,
      VQ_WEBHOOK_SECRET: SECRET,
      VQ_WEBHOOK_ALLOW: '127.0.0.1',
      VQ_WEBHOOK_BACKOFF: '50ms',
      ...config,
    },
  });
  const app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const call = (path: string, token: string, json?: unknown) =>
    apiCall(base, token, path, json === undefined ? {} : { json });
  const finished = (id: string, token: string) =>
    waitFor(async () => (await call(`/v1/batches/${id}`, token)).json?.finishedAt !== undefined, 30_000, id);
  return { h, call, finished, close: () => app.close() };
}

const TWO = [
  { id: 'frota', tokens: [A] },
  { id: 'seguros', tokens: [B] },
];

describe('tenant isolation (HTTP API)', () => {
  it('the same plates from two accounts: two batches, two look-ups; neither reads, changes or hears of the other', async () => {
    const { h, call, finished, close } = await api(TWO);
    const receiverA = await startReceiver(SECRET);
    const receiverB = await startReceiver(SECRET);
    try {
      const plates = makePlates(4);
      const a = await call('/v1/batches', A, { plates, callbackUrl: `${receiverA.url}/a` });
      expect(a.status).toBe(202);
      expect(a.json.batch).toMatchObject({ account: 'frota', created: true });
      // B posts the very same plates (the same derived id), then again with its own callback.
      const b = await call('/v1/batches', B, { plates });
      expect(b.status).toBe(202);
      expect(b.json.batch).toMatchObject({ id: a.json.batch.id, account: 'seguros', created: true });
      const again = await call('/v1/batches', B, { plates, callbackUrl: `${receiverB.url}/b` });
      expect(again.status, again.text).toBe(202);
      expect(again.json.batch).toMatchObject({ account: 'seguros', created: false });
      const id = a.json.batch.id as string;
      await finished(id, A);
      await finished(id, B);
      // Each account's look-up ran, on its own key: every plate created twice in all, once by each.
      const stats = h.sim.stats({ plates: true });
      expect(stats.creates).toBe(2 * plates.length);
      for (const plate of plates) expect(stats.createsByPlate?.[plate], plate).toBe(2);
      expect(stats.byKey.frota?.counted).toBeGreaterThanOrEqual(plates.length);
      expect(stats.byKey.seguros?.counted).toBeGreaterThanOrEqual(plates.length);
      // Each reads its own batch, with its own metadata and callback, and its own results.
      const readA = await call(`/v1/batches/${id}`, A);
      const readB = await call(`/v1/batches/${id}`, B);
      expect(readA.json).toMatchObject({ account: 'frota' });
      expect(readB.json).toMatchObject({ account: 'seguros' });
      expect(readA.text).not.toContain(receiverB.url);
      expect(readB.text).not.toContain(receiverA.url);
      const rowsA = (await call(`/v1/batches/${id}/results`, A)).text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      const rowsB = (await call(`/v1/batches/${id}/results`, B)).text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      const queries = (rows: { queryId?: string }[]) => new Set(rows.map((r) => r.queryId));
      for (const q of queries(rowsA)) expect(queries(rowsB).has(q), 'a query id seen by both').toBe(false);
      // A's receiver got A's batch.finished only; B's got B's.
      await receiverA.waitFor(1);
      await receiverB.waitFor(1);
      expect(receiverA.deliveries.every((d) => d.payload?.data?.account === 'frota')).toBe(true);
      expect(receiverB.deliveries.every((d) => d.payload?.data?.account === 'seguros')).toBe(true);
      // Each account lists only its own; the administrator sees two batches of that id, and must say which.
      expect((await call('/v1/batches', A)).json.batches.map((x: { account: string }) => x.account)).toEqual(['frota']);
      expect((await call('/v1/batches', ADMIN)).json.total).toBe(2);
      const ambiguous = await call(`/v1/batches/${id}`, ADMIN);
      expect(ambiguous.status).toBe(409);
      expect(ambiguous.json.error.code).toBe('BATCH_ID_AMBIGUOUS');
    } finally {
      await receiverA.close();
      await receiverB.close();
      await close();
    }
  });

  it('an id another account named first is neither "taken" nor revealed: each account has its own order-1001', async () => {
    const { call, close } = await api(TWO);
    try {
      const claimed = await call('/v1/batches', B, { plates: makePlates(2, 50), batchId: 'order-1001' });
      expect(claimed.status).toBe(202);
      // A has no batch order-1001: not found, not "taken".
      const probe = await call('/v1/batches/order-1001', A);
      expect(probe.status).toBe(404);
      expect(probe.text).not.toContain('seguros');
      const mine = await call('/v1/batches', A, { plates: makePlates(3, 60), batchId: 'order-1001' });
      expect(mine.status).toBe(202);
      expect(mine.json.batch).toMatchObject({ id: 'order-1001', account: 'frota', created: true });
      expect(mine.json.batch.counts.total).toBe(3);
      // B's batch is unchanged, and B cannot delete or retry A's.
      expect((await call('/v1/batches/order-1001', B)).json.counts.total).toBe(2);
      expect((await call('/v1/batches/order-1001', A)).json.counts.total).toBe(3);
      // The same id with other content, in one's own account, is still taken there.
      const taken = await call('/v1/batches', A, { plates: makePlates(1, 90), batchId: 'order-1001' });
      expect(taken.status).toBe(409);
      expect(taken.json.error.code).toBe('BATCH_ID_TAKEN');
    } finally {
      await close();
    }
  });

  it("reuse stays within an account: B's dry run and batch neither see nor get A's paid result", async () => {
    const { h, call, finished, close } = await api(TWO);
    try {
      const plates = makePlates(3, 300);
      const a = await call('/v1/batches', A, { plates, reuseWithinMs: 86_400_000 });
      expect(a.status).toBe(202);
      await finished(a.json.batch.id, A);
      const dry = await call('/v1/batches', B, { plates, reuseWithinMs: 86_400_000, name: 'other', dryRun: true });
      expect(dry.status).toBe(200);
      expect(dry.json.estimate.reusable ?? 0).toBe(0);
      const b = await call('/v1/batches', B, { plates, reuseWithinMs: 86_400_000, name: 'other' });
      await finished(b.json.batch.id, B);
      expect((await call(`/v1/batches/${b.json.batch.id}`, B)).json.counts.reused).toBe(0);
      expect(h.sim.stats().creates).toBe(2 * plates.length);
      // A's own second batch reuses A's results: reuse itself still works.
      const a2 = await call('/v1/batches', A, { plates, reuseWithinMs: 86_400_000, name: 'again' });
      await finished(a2.json.batch.id, A);
      expect((await call(`/v1/batches/${a2.json.batch.id}`, A)).json.counts.reused).toBe(plates.length);
      expect(h.sim.stats().creates).toBe(2 * plates.length);
    } finally {
      await close();
    }
  });

  it('accounts that opt in to shareResults reuse each other’s results', async () => {
    const { h, call, finished, close } = await api(TWO.map((a) => ({ ...a, shareResults: true })));
    try {
      const plates = makePlates(3, 400);
      const a = await call('/v1/batches', A, { plates, reuseWithinMs: 86_400_000 });
      await finished(a.json.batch.id, A);
      const b = await call('/v1/batches', B, { plates, reuseWithinMs: 86_400_000, name: 'shared' });
      await finished(b.json.batch.id, B);
      expect((await call(`/v1/batches/${b.json.batch.id}`, B)).json.counts.reused).toBe(plates.length);
      expect(h.sim.stats().creates).toBe(plates.length);
    } finally {
      await close();
    }
  });
});
