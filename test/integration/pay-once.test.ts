// Paying once for a plate (issue 36, defect 4), as a user meets it: a later batch that asks for
// reuse finds what an earlier one paid for, even if that one had not asked; and the file run with
// `vqb run` and then sent to the API (the README's curl) resumes its batch instead of paying again.
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { harnessEnv, runVqb } from '../helpers/process.js';

const harness = useHarness();
const TOKEN = 'pay-once-token-0123456789abcdef';

describe('paying once for a plate', () => {
  it('`--reuse-within 24h` answers from a batch that finished minutes ago without asking for reuse', async () => {
    const h = await harness.start({ label: 'reuse-any', workers: 0 });
    const plates = makePlates(60);
    const first = join(h.config.outDir, '..', 'frota.csv');
    const second = join(h.config.outDir, '..', 'frota-de-novo.csv');
    await writeFile(first, `placa\n${plates.join('\n')}\n`);
    await writeFile(second, `placa;obs\n${plates.map((p) => `${p};again`).join('\n')}\n`);
    const ran = await runVqb(['run', first], harnessEnv(h));
    expect(ran.code).toBe(0);
    expect(h.sim.stats().creates).toBe(60);

    const dry = await runVqb(['run', '--dry-run', '--reuse-within', '24h', second], harnessEnv(h));
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('60 answered from stored results');
    expect(dry.stdout).toContain('would create 0 queries');
    const again = await runVqb(['run', '--reuse-within', '24h', second], harnessEnv(h));
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/0 creates sent.* 60 reused/);
    expect(h.sim.stats().creates).toBe(60);
    // Without --reuse-within nothing is reused: the window is the batch's to ask for.
    const third = join(h.config.outDir, '..', 'frota-3.csv');
    await writeFile(third, `placa;x\n${plates.map((p) => `${p};3`).join('\n')}\n`);
    const dryNoReuse = await runVqb(['run', '--dry-run', third], harnessEnv(h));
    expect(dryNoReuse.stdout).toContain('would create 60 queries');
  }, 90_000);

  it('the file run with `vqb run` and then sent to POST /v1/batches as text/csv resumes its batch, nothing paid', async () => {
    const h = await harness.start({ label: 'api-resume', workers: 0, config: { VQ_API_TOKENS: TOKEN } });
    const file = join(h.config.outDir, '..', 'minha-frota.csv');
    const csv = `placa\n${makePlates(12).join('\n')}\n`;
    await writeFile(file, csv);
    const ran = await runVqb(['run', file], harnessEnv(h));
    expect(ran.code).toBe(0);
    const batchId = /batch (minha-frota-[0-9a-f]{12})/.exec(ran.stdout)?.[1];
    expect(batchId).toBeDefined();
    expect(h.sim.stats().creates).toBe(12);

    const app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const post = async (query = '') => {
        const res = await fetch(`${base}/v1/batches${query}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/csv' },
          body: csv,
        });
        return { status: res.status, json: (await res.json()) as any };
      };
      const dry = await post('?dryRun=true');
      expect(dry.status).toBe(200);
      expect(dry.json.estimate).toMatchObject({ batchId, alreadyFinished: 12, creates: 0 });
      const sent = await post();
      expect(sent.json.batch).toMatchObject({ id: batchId, created: false });
      expect(sent.json.batch.counts).toMatchObject({ done: 12 });
      // A name the caller gives is a batch of its own, as `vqb run` on a file of another name is.
      const named = await post('?name=outra');
      expect(named.json.batch).toMatchObject({ created: true });
      expect(named.json.batch.id).not.toBe(batchId);
    } finally {
      await app.close();
    }
  }, 90_000);
});
