// Money as money: with a price per query, counts become amounts (pt-BR on the terminal, numbers in
// JSON) in the dry run, `vqb cost`, `vqb status` and the batch JSON; a cap in money holds a batch at
// cap ÷ price creates, counted at the simulator. `vqb` run in process as a user runs it (runVqb); the
// capped run is spawned (needs `npm run build`).
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.js';
import { ingestList } from '../../src/producers/enqueue.js';
import { createHttpApi } from '../../src/server.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { parseSamples, promtoolCheck, sumOf } from '../helpers/metrics.js';
import { harnessEnv, runVqb, startVqb, waitFor } from '../helpers/process.js';

const harness = useHarness();

async function plateFile(h: Harness, name: string, plates: string[]): Promise<string> {
  const file = join(h.config.outDir, '..', name);
  await writeFile(file, `placa\r\n${plates.join('\r\n')}\r\n`);
  return file;
}

describe('money as money', () => {
  it('the dry run, vqb cost and vqb status show money: R$ 1.234,50 in words, numbers in JSON', async () => {
    const h = await harness.start({ label: 'money1', workers: 0 });
    const env = harnessEnv(h, { VQ_PRICE_PER_QUERY: '123.45' });
    const file = await plateFile(h, 'ten.csv', makePlates(10));

    const dry = await runVqb(['run', file, '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('cost: R$ 1.234,50 (10 queries × R$ 123,45; polls not charged');
    expect(h.sim.stats().requests).toBe(0);

    const run = await runVqb(['run', file], env);
    expect(run.code, run.stderr).toBe(0);
    expect(h.sim.stats().creates).toBe(10);
    expect(run.stdout).toMatch(/spend: R\$ 1\.234,50 \(R\$ 123,45 per query\)/);

    const cost = await runVqb(['cost', '--days', '1'], env);
    expect(cost.stdout.split('\n')[0]).toMatch(/ spend$/);
    expect(cost.stdout.split('\n')[1]).toMatch(/ R\$ 1\.234,50$/);
    const json = JSON.parse((await runVqb(['cost', '--days', '1', '--json'], env)).stdout) as {
      spend: { amount: number; currency: string }[];
    }[];
    expect(json[0]!.spend).toEqual([{ amount: 1234.5, currency: 'BRL' }]);

    const id = /batch (\S+): \d+ rows/.exec(run.stdout)![1]!;
    const status = JSON.parse((await runVqb(['status', id, '--json'], env)).stdout) as {
      cost: { amount: number; currency: string; perQuery: number; perPoll: number };
    };
    expect(status.cost).toEqual({ amount: 1234.5, currency: 'BRL', perQuery: 123.45, perPoll: 0 });
    const account = (await runVqb(['status'], env)).stdout;
    expect(account).toMatch(/spend: today R\$ 1\.234,50, this month R\$ 1\.234,50/);
    const all = JSON.parse((await runVqb(['status', '--json'], env)).stdout) as {
      accounts: { spend: { today: { amount: number } } }[];
    };
    expect(all.accounts[0]!.spend.today).toEqual({ amount: 1234.5, currency: 'BRL' });

    // Without a price nothing speaks of money.
    const plain = await runVqb(['cost', '--days', '1'], harnessEnv(h));
    expect(plain.stdout).not.toMatch(/R\$|spend/);
  });

  it('a cap in money holds the batch at cap ÷ price creates; its plates wait with the budget reason', async () => {
    const h = await harness.start({ label: 'money2', workers: 0, config: { VQ_PRICE_PER_QUERY: '0.35' } });
    const env = harnessEnv(h, { VQ_PRICE_PER_QUERY: '0,35' });
    const file = await plateFile(h, 'thirty.csv', makePlates(30));
    // 3.00 at 0.35 is 8 whole queries (8.57). Its output is read while it runs (startVqb).
    const run = startVqb(['run', file, '--max-spend', '3,00'], env);
    const printed = () => run.output().stdout;
    await waitFor(async () => printed().includes('reached its cap'), 30_000, 'the run to say the batch is at its cap');
    const out = printed();
    const id = /batch (\S+): \d+ rows/.exec(out)![1]!;
    const info = await h.services.batchViews.get(id);
    expect(info.blocked).toBe('budget');
    expect(info.maxCreates).toBe(8);
    expect(out).toContain(`batch ${id} reached its cap of 8 creates (R$ 2,80): its other plates wait`);
    expect(h.sim.stats().creates).toBeLessThanOrEqual(Math.floor(3 / 0.35));
    expect(info.counts.failed).toBe(0);
    // The cap is reached when its 8th create is admitted; the spend counts it once it is sent.
    await waitFor(async () => (await h.services.batchViews.get(id)).counts.createsSent === 8, 30_000, '8 creates sent');
    const status = await runVqb(['status', id], env);
    expect(status.stdout).toMatch(/spend: R\$ 2,80 of at most R\$ 2,80/);
    expect(status.stdout).toMatch(/creates wait: the batch reached its cap of 8 creates/);
    // At a cap the user set the run ends by itself once nothing created is running (issue 46, 5).
    expect((await run.done).code).toBe(4);
    expect(printed()).toMatch(/stopped at the spending cap: 22 plates not looked up/);
    expect(h.sim.stats().creates).toBe(8);
    // vqb budget raises the cap in money too: 4.90 at 0.35 is 14 creates.
    const raised = await runVqb(['budget', id, '--max-spend', '4,90'], env);
    expect(raised.code, raised.stderr).toBe(0);
    expect(raised.stdout).toMatch(/create cap 14 \(R\$ 4,90 at R\$ 0,35 per query\); \d+ of \d+ queued plates go on/);
    expect((await h.services.batchViews.get(id)).maxCreates).toBe(14);

    // The library's (and the API's) maxSpend is the same cap.
    await ingestList(h.services, makePlates(20, 500), { source: 'library', batchId: 'lib-cap', maxSpend: 1 });
    expect((await h.services.batchViews.get('lib-cap')).maxCreates).toBe(2);
  });

  it('a cap in money without a price is refused before anything is read or sent', async () => {
    const h = await harness.start({ label: 'money3', workers: 0 });
    const file = await plateFile(h, 'five.csv', makePlates(5));
    const run = await runVqb(['run', file, '--max-spend', '150.00'], harnessEnv(h));
    expect(run.stderr).toMatch(
      /^vqb: a cap in money needs a price per query for account default: set VQ_PRICE_PER_QUERY/,
    );
    expect(run.code).toBe(2);
    const bad = await runVqb(['run', file, '--max-spend', 'cem'], harnessEnv(h, { VQ_PRICE_PER_QUERY: '1' }));
    expect(bad.stderr).toMatch(/--max-spend takes an amount such as 150.00/);
    expect(bad.code).toBe(2);
    const budget = await runVqb(['budget', '--max-spend', '1'], harnessEnv(h));
    expect(budget.stderr).toMatch(/a cap in money needs a price per query/);
    expect(budget.code).toBe(2);
    expect(h.sim.stats().requests).toBe(0);
  });

  it('metrics: each account spends today and this month at its own price, and the price, per currency', async () => {
    const priced = await harness.start({
      label: 'money4',
      workers: 1,
      accounts: [
        { id: 'frota', fields: { pricePerQuery: 0.35 } },
        { id: 'seguro', fields: { pricePerQuery: '1,10', currency: 'usd' } },
        { id: 'free' },
      ],
    });
    const metrics = new Metrics({ accounts: priced.config.accounts });
    metrics.observeQueue(priced.services);
    await priced.enqueue('f', makePlates(20), { account: 'frota' });
    await priced.enqueue('s', makePlates(3, 100), { account: 'seguro' });
    await priced.waitForBatch('f');
    await priced.waitForBatch('s');
    const text = (await metrics.render()).body;
    expect(await promtoolCheck(text)).toEqual({ ok: true, output: '' });
    const samples = parseSamples(text);
    expect(sumOf(samples, 'vqb_account_spend', { account: 'frota', currency: 'BRL', period: 'day' })).toBe(7);
    expect(sumOf(samples, 'vqb_account_spend', { account: 'seguro', currency: 'USD', period: 'month' })).toBe(3.3);
    expect(samples.filter((s) => s.name === 'vqb_account_spend' && s.labels.account === 'free')).toEqual([]);
    expect(sumOf(samples, 'vqb_account_price', { account: 'frota', per: 'query' })).toBe(0.35);
    expect(sumOf(samples, 'vqb_account_price', { account: 'frota', per: 'poll' })).toBe(0);
  });

  it('the console estimate and batch page, and the API (cost object, maxSpend; 422 NO_PRICE without a price)', async () => {
    const token = 'admin-token-0123456789abcdef';
    const h = await harness.start({
      label: 'money5',
      workers: 1,
      config: { VQ_API_TOKENS: token },
      accounts: [{ id: 'priced', fields: { pricePerQuery: '1234.5' } }, { id: 'unpriced' }],
    });
    const app = await createHttpApi({
      services: h.services,
      config: h.config,
      logger: h.logs.logger,
      dashboard: false,
    });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const auth = { authorization: `Bearer ${token}` };
      const post = (body: unknown) =>
        fetch(`${base}/v1/batches`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });

      const refused = await post({ plates: makePlates(3), account: 'unpriced', maxSpend: 10 });
      expect(refused.status).toBe(422);
      expect(await refused.json()).toMatchObject({ statusCode: 422, error: { code: 'NO_PRICE' } });

      const dry = await post({ plates: makePlates(3), account: 'priced', dryRun: true });
      expect(((await dry.json()) as { estimate: { cost: unknown } }).estimate.cost).toEqual({
        amount: 3703.5,
        currency: 'BRL',
        perQuery: 1234.5,
        perPoll: 0,
      });
      const posted = await post({ plates: makePlates(3), account: 'priced', maxSpend: 2500 });
      expect(posted.status).toBe(202);
      const { batch } = (await posted.json()) as { batch: { id: string; maxCreates: number } };
      expect(batch.maxCreates).toBe(2);
      await waitFor(
        async () => (await h.services.batchViews.get(batch.id)).blocked === 'budget',
        20_000,
        'the batch held at its cap',
      );
      // Held as soon as the third plate found no room under the cap: the second create may still be
      // on its way, and its cost is counted when it has left.
      const costOf = async () =>
        (
          (await (await fetch(`${base}/v1/batches/${batch.id}`, { headers: auth })).json()) as {
            cost: { amount: number };
          }
        ).cost;
      await waitFor(async () => (await costOf()).amount === 2469, 20_000, "the second create's cost counted");
      expect(await costOf()).toEqual({ amount: 2469, currency: 'BRL', perQuery: 1234.5, perPoll: 0, maxSpend: 2469 });
      expect(h.sim.stats().creates).toBe(2);

      // The console, signed in as a browser does (the form's own cookie and token when it has them).
      const form0 = await fetch(`${base}/sign-in`);
      const formCookie = form0.headers.getSetCookie().map((c) => c.split(';')[0]!);
      const formCsrf = /name="csrf" value="([^"]+)"/.exec(await form0.text())?.[1];
      const signed = await fetch(`${base}/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: formCookie.join('; ') },
        body: new URLSearchParams({ token, ...(formCsrf ? { csrf: formCsrf } : {}) }).toString(),
      });
      expect(signed.status).toBe(303);
      const cookie = signed.headers
        .getSetCookie()
        .map((c) => c.split(';')[0]!)
        .filter((c) => c.startsWith('vqb_session='))
        .join('; ');
      const page = await (await fetch(`${base}/batches/${batch.id}`, { headers: { cookie } })).text();
      expect(page).toMatch(/data-field="cost">R\$ 2\.469,00</);
      const upload = await (await fetch(`${base}/upload`, { headers: { cookie } })).text();
      const csrf = /name="csrf" value="([^"]+)"/.exec(upload)?.[1] ?? '';
      const form = new FormData();
      form.append('csrf', csrf);
      form.append('account', 'priced');
      form.append('file', new Blob([`placa\n${makePlates(4, 900).join('\n')}\n`], { type: 'text/csv' }), 'p.csv');
      const staged = await fetch(`${base}/upload`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie },
        body: form,
      });
      expect(staged.status).toBe(303);
      const estimate = await (await fetch(`${base}${staged.headers.get('location')}`, { headers: { cookie } })).text();
      expect(estimate).toMatch(/data-estimate="cost">R\$ 4\.938,00</);
    } finally {
      await app.close();
    }
  });

  it('an upstream that states its price: the batch records what its answers said beside the estimate', async () => {
    const h = await harness.start({
      label: 'money6',
      workers: 1,
      sim: { queryCost: '0.40' },
      config: { VQ_PRICE_PER_QUERY: '0.35' },
    });
    await h.enqueue('said', makePlates(12));
    await h.waitForBatch('said');
    const status = await runVqb(['status', 'said', '--json'], harnessEnv(h, { VQ_PRICE_PER_QUERY: '0.35' }));
    const view = JSON.parse(status.stdout) as { cost: { amount: number; reported: Record<string, number> } };
    expect(view.cost.amount).toBe(4.2);
    const polls = (await h.services.batchViews.get('said')).counts.polls;
    expect(view.cost.reported).toEqual({ amount: 4.8, answers: 12 + polls, billed: 12, notBilled: polls });
    const text = await runVqb(['status', 'said'], harnessEnv(h, { VQ_PRICE_PER_QUERY: '0.35' }));
    expect(text.stdout).toMatch(
      /spend: R\$ 4,20 \(R\$ 0,35 per query\); the upstream's answers said R\$ 4,80 \(\d+ answers, 12 billed/,
    );
  });
});
