// `vqb check` as a user runs it (in process through main, against the simulator over HTTP): a key
// checked for free (one line per account, documented exit codes, nothing created), and `--create` as
// the one paid check, counted at the simulator. The refusal with no terminal is spawned (needs
// `npm run build`).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { accountKey, useHarness } from '../helpers/engine.js';
import { freePort, harnessEnv, runVqb } from '../helpers/process.js';

const harness = useHarness();

describe('vqb check', () => {
  it('four keys, four clear lines: working, expired, without view permission, upstream unreachable; 0 creates', async () => {
    const h = await harness.start({
      label: 'check4',
      workers: 0,
      accounts: [
        { id: 'works' },
        { id: 'expired', key: { expiresAt: '2020-01-01T00:00:00.000Z' } },
        { id: 'noview', key: { permissions: ['run_queries'] } },
      ],
    });
    // A fourth account whose upstream is a port nobody listens on.
    const accounts = [
      ...['works', 'expired', 'noview'].map((id) => ({ id, apiKeyFile: h.keyFileOf(id) })),
      { id: 'gone', apiKeyFile: h.keyFileOf('works'), baseUrl: `http://127.0.0.1:${await freePort()}` },
    ];
    const file = join(h.keyFileOf('x'), '..', 'check-accounts.json');
    await writeFile(file, JSON.stringify({ accounts }));
    const env = harnessEnv(h, { VQ_ACCOUNTS_FILE: file });

    const all = await runVqb(['check'], env);
    const lines = all.stdout.trimEnd().split('\n');
    expect(lines, all.stderr).toHaveLength(4);
    expect(lines[0]).toMatch(
      /^account works: OK: the key works and may view queries .*404 QUERY_NOT_FOUND.*; limit \d+ \(\d+ left, resets in \d+ s\); \d+ ms$/,
    );
    expect(lines[1]).toMatch(/^account expired: EXPIRED KEY: the key has expired \(401 EXPIRED_API_KEY/);
    expect(lines[2]).toMatch(
      /^account noview: NO VIEW PERMISSION: .*"View queries already run" \(403 INSUFFICIENT_PERMISSIONS\)/,
    );
    expect(lines[3]).toMatch(
      /^account gone: UNREACHABLE: the upstream did not answer .*ECONNREFUSED.*check VQ_BASE_URL/,
    );
    expect(all.code).toBe(3);

    // Each alone: its own exit code (docs/cli.md).
    const codes: Record<string, number | null> = {};
    for (const id of ['works', 'expired', 'noview', 'gone']) {
      codes[id] = (await runVqb(['check', '--account', id], env)).code;
    }
    expect(codes).toEqual({ works: 0, expired: 3, noview: 3, gone: 1 });

    const json = await runVqb(['check', '--json'], env);
    const report = JSON.parse(json.stdout) as { accounts: { account: string; verdict: string }[]; exitCode: number };
    expect(report.accounts.map((a) => [a.account, a.verdict])).toEqual([
      ['works', 'ok'],
      ['expired', 'expired-key'],
      ['noview', 'no-view-permission'],
      ['gone', 'unreachable'],
    ]);
    expect(report.exitCode).toBe(3);
    expect(json.code).toBe(3);

    // Nothing was created, and the key never appears in what was printed.
    expect(h.sim.stats().creates).toBe(0);
    expect(h.sim.stats().countedCreates).toBe(0);
    for (const out of [all, json]) expect(out.stdout + out.stderr).not.toContain(accountKey('works'));
  });

  it('--create ABC1D23 --yes sends exactly one create, follows it to the end and prints the raw answers', async () => {
    const h = await harness.start({ label: 'checkc', workers: 0, sim: { completionMs: [300, 600] } });
    const env = harnessEnv(h, { VQ_PRICE_PER_QUERY: '0.35' });
    const run = await runVqb(['check', '--create', 'ABC1D23', '--yes'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('one create of ABC1D23');
    expect(run.stdout).toContain('R$ 0,35');
    expect(run.stdout).toMatch(/^POST \/queries\/integration\/agregados → 201 in \d+ ms$/m);
    expect(run.stdout).toMatch(/^ {2}raw: \{"statusCode":201,"body":\{"queryId":"[^"]+","status":"PROCESSING"/m);
    expect(run.stdout).toMatch(/^ {2}vqb read: query id "[^"]+", status "PROCESSING" → pending$/m);
    expect(run.stdout).toMatch(/^GET \/queries\/integration\/\S+ → 200 in \d+ ms$/m);
    expect(run.stdout).toMatch(/"status":"COMPLETED"/);
    expect(run.stdout).toMatch(/vqb understood this upstream end to end/);
    expect(h.sim.stats().creates).toBe(1);
    expect(h.sim.stats().countedCreates).toBe(1);
    // The paid check is in the day's cost report, so the invoice still reconciles.
    expect(run.stdout).toMatch(/counted in `vqb cost` \(today, account default\)/);
    const cost = JSON.parse((await runVqb(['cost', '--days', '1', '--json'], env)).stdout) as {
      counts: { createsSent: number; pollsSent: number };
      spend: { amount: number }[];
    }[];
    expect(cost[0]!.counts.createsSent).toBe(1);
    expect(cost[0]!.counts.pollsSent).toBe(h.sim.stats().countedGets);
    expect(cost[0]!.spend).toEqual([{ amount: 0.35, currency: 'BRL' }]);
  });

  it('--create asks first: with no terminal and no --yes it refuses, and an invalid plate never leaves', async () => {
    const h = await harness.start({ label: 'checkr', workers: 0 });
    const env = harnessEnv(h);
    // No terminal: runVqb's stdin is none (main(argv, io) reads io.stdin).
    const refused = await runVqb(['check', '--create', 'ABC1D23'], env);
    expect(refused.stderr).toMatch(/costs one query.*no terminal to ask: run it again with --yes/);
    expect(refused.code).toBe(2);
    const invalid = await runVqb(['check', '--create', 'ABC1D2', '--yes'], env);
    expect(invalid.stderr).toMatch(/"ABC1D2" is not a plate/);
    expect(invalid.code).toBe(2);
    expect(h.sim.stats().requests).toBe(0);
  });

  it('--create shows a bare answer whose id is `id` as it came, read all the same', async () => {
    const h = await harness.start({ label: 'checku', workers: 0, sim: { idField: 'id', envelope: false } });
    const run = await runVqb(['check', '--create', 'ABC1D23', '--yes'], harnessEnv(h));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/raw: \{"id":"/);
    expect(h.sim.stats().creates).toBe(1);
  });
});
