// The HTTP API with accounts: a token listed under an account sees, submits, downloads and retries
// only that account's batches (404 for the others, as if they did not exist); an administrator's
// token sees all; each batch says its account, share and why its account waits.
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { makePlates, useHarness } from '../helpers/engine.js';

const ADMIN = 'admin-token-0123456789abcdef';
const FROTA = 'frota-token-0123456789abcdef';
const SEGUROS = 'seguros-token-0123456789abcd';

const harness = useHarness();

async function api(): Promise<{
  call: (path: string, token: string, json?: unknown) => Promise<{ status: number; json: any; text: string }>;
  close: () => Promise<void>;
}> {
  const h = await harness.start({
    label: 'http-accounts',
    accounts: [
      { id: 'frota', tokens: [FROTA] },
      { id: 'seguros', tokens: [SEGUROS] },
    ],
    config: { VQ_API_TOKENS: ADMIN },
  });
  const app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const call = async (path: string, token: string, json?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: json === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        ...(json === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    });
    const text = await res.text();
    return { status: res.status, text, json: text.startsWith('{') ? JSON.parse(text) : undefined };
  };
  return { call, close: () => app.close() };
}

describe('HTTP API: tokens scoped to accounts', () => {
  it("a scoped token cannot see, download or retry another account's batch (404), and submits to its own account by default", async () => {
    const { call, close } = await api();
    try {
      const mine = await call('/v1/batches', FROTA, { plates: makePlates(3) });
      expect(mine.status).toBe(202);
      expect(mine.json.batch).toMatchObject({ account: 'frota', priority: 'normal', weight: 1 });
      const theirs = await call('/v1/batches', SEGUROS, { plates: makePlates(3, 100), priority: 'interactive' });
      expect(theirs.json.batch).toMatchObject({ account: 'seguros', priority: 'interactive' });
      const id = theirs.json.batch.id as string;

      for (const path of [`/v1/batches/${id}`, `/v1/batches/${id}/results`, `/v1/batches/${id}/results?format=csv`]) {
        const answer = await call(path, FROTA);
        expect(answer.status, path).toBe(404);
        expect(answer.json.error.code).toBe('NOT_FOUND');
        expect(answer.text).not.toContain('seguros');
      }
      expect((await call(`/v1/batches/${id}/retry`, FROTA, {})).status).toBe(404);
      // Submitting to another account is as unknown as a batch of it.
      const foreign = await call('/v1/batches', FROTA, { plates: makePlates(1, 200), account: 'seguros' });
      expect(foreign.status).toBe(404);
      expect(foreign.json.error.code).toBe('ACCOUNT_NOT_FOUND');

      const listed = await call('/v1/batches', FROTA);
      expect(listed.json.batches.map((b: { account: string }) => b.account)).toEqual(['frota']);
      expect(listed.json.total).toBe(1);
      // Its own batch, and the administrator sees both.
      expect((await call(`/v1/batches/${mine.json.batch.id}`, FROTA)).status).toBe(200);
      expect((await call(`/v1/batches/${id}`, ADMIN)).status).toBe(200);
      expect((await call('/v1/batches', ADMIN)).json.total).toBe(2);
      // The dashboard shows every account's queue: administrators only.
      expect((await call('/admin/queues', FROTA)).status).toBe(404);
      expect((await call('/admin/queues', ADMIN)).status).toBe(200);
    } finally {
      await close();
    }
  });
});
