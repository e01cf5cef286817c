// A request's own rules are decided once (producers/enqueue.ts checkRequest), whichever door it
// came through (issue 45, "one place for each decision"): a batch id of the wrong form is the same
// typed error, in the same words, from `vqb run`, the HTTP API and the library, and nothing is
// stored or paid. `vqb run` used to raise its own usage error ("--batch-id: …") for it.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VqbError } from '../../src/errors.js';
import { enqueue } from '../../src/producers/enqueue.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { apiCall, listenApi } from '../helpers/http.js';
import { cli } from '../helpers/process.js';

const harness = useHarness();
const TOKEN = 'svc-token-request-rules-0123456789ab';
const BAD = 'bad id!';

describe("a request's own rules, one place for every door", () => {
  it('a batch id of the wrong form is BAD_BATCH_ID in the same words from the CLI, the API and the library', async () => {
    const h = await harness.start({ label: 'rules', config: { VQ_API_TOKENS: TOKEN } });
    const plates = makePlates(3);
    const file = join(await mkdtemp(join(tmpdir(), 'vqb-rules-')), 'frota.csv');
    await writeFile(file, `placa\n${plates.join('\n')}\n`);

    const run = await cli(h, ['run', file, '--batch-id', BAD]);
    expect(run.code, run.stderr).toBe(2);

    const { app, base } = await listenApi(h);
    const api = await apiCall(base, TOKEN, '/v1/batches', { json: { plates, batchId: BAD } });
    await app.close();
    expect(api.status).toBe(400);
    const apiError = (api.json as { error: { code: string; message: string } }).error;
    expect(apiError.code).toBe('BAD_BATCH_ID');

    const library = await enqueue(h.services, { source: 'library', plates }, { batchId: BAD }).catch((e: unknown) => e);
    expect(library).toBeInstanceOf(VqbError);
    expect((library as VqbError).code).toBe('BAD_BATCH_ID');
    // One rule, one sentence: the CLI prints the message the API and the library carry.
    expect(apiError.message).toBe((library as VqbError).message);
    expect(run.stderr).toContain((library as VqbError).message);
    // Nothing was stored, nothing was sent.
    expect((await h.services.batches.refs()).total).toBe(0);
    expect(h.sim.stats().creates).toBe(0);
  });
});
