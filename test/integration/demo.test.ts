// `npm install && npm run demo` on a machine where no Redis runs: the demo starts a throwaway
// redis-server of its own, or says in one line how to get one. The shared Redis answers on 6379
// here, so the tests point the demo's idea of the default address at a port with nothing on it.
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import ExcelJS from 'exceljs';
import { afterEach, describe, expect, it } from 'vitest';
import { probePort } from '../../src/redis/server.js';
import { freePort, runVqb } from '../helpers/process.js';
import { sheetValues } from '../helpers/xlsx.js';

/**
 * The demo's workbook as an operator opens it: Placa, the user's columns, Marca, Modelo… first; a
 * frozen, filtered header; the times on São Paulo's clock (VQ_TIME_ZONE); rejects and failures in
 * Portuguese.
 */
async function expectReadableWorkbook(path: string, started: number): Promise<void> {
  const bytes = await readFile(path);
  const wb = new ExcelJS.Workbook();
  await wb.xlsx.load(bytes as unknown as ArrayBuffer);
  const ws = wb.getWorksheet('resultados')!;
  expect(ws.views[0]).toMatchObject({ state: 'frozen', ySplit: 1 });
  const rows = await sheetValues(bytes, 'resultados');
  const header = rows[0] as string[];
  expect(header.slice(0, 6)).toEqual(['Placa', 'cliente', 'cidade', 'codigo_interno', 'Marca', 'Modelo']);
  expect(ws.autoFilter).toBe(`A1:${ws.getColumn(header.length).letter}1`);
  expect(rows).toHaveLength(300);
  const col = (name: string) => header.indexOf(name);
  const first = rows[1]!;
  expect(first[col('Placa')]).toBe('KEM-0181');
  expect(first[col('Situação da consulta')]).toBe('concluída');
  // São Paulo is 3 h behind UTC: the cell's clock reads the run's local time.
  const queued = first[col('Enfileirada em')] as Date;
  expect(queued).toBeInstanceOf(Date);
  const local = queued.getTime() + 3 * 3_600_000;
  expect(local).toBeGreaterThanOrEqual(Math.floor(started / 1000) * 1000);
  expect(local).toBeLessThanOrEqual(Date.now());
  const failed = rows.find((r) => r[col('Placa')] === 'WYH1948')!;
  expect(failed[col('Situação da consulta')]).toBe('falhou');
  expect(failed[col('Mensagem')]).toBe('nenhum veículo encontrado para esta placa');
  expect((await sheetValues(bytes, 'rejeitadas'))[2]).toEqual([
    49,
    'AB-12',
    'BAD_LENGTH',
    'placas têm 7 caracteres; esta tem 4',
  ]);
}

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/**
 * The quick start's sample of what `npm run demo` prints, one pattern per line: `…` stands for
 * anything and numbers may differ; the progress bar line (a terminal only) is left out.
 */
async function readmeSample(): Promise<RegExp[]> {
  const readme = await readFile(resolve(import.meta.dirname, '../../README.md'), 'utf8');
  const lines = readme.slice(readme.indexOf('## Quick start')).split('\n');
  // The first fenced block without a language (the one before it is ```sh).
  let open = -1;
  for (let i = 0, inside = false; i < lines.length && open < 0; i++) {
    if (!lines[i]!.startsWith('```')) continue;
    if (!inside && lines[i] === '```') open = i;
    inside = !inside;
  }
  const close = lines.indexOf('```', open + 1);
  expect(open).toBeGreaterThan(0);
  const number = /\d+(?:\\\.\d+)?/g;
  return lines
    .slice(open + 1, close)
    .filter((line) => !line.startsWith('█'))
    .map((line) => {
      const parts = line
        .split('…')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(number, '\\d+(?:\\.\\d+)?'));
      return new RegExp(`^${parts.join('.*')}$`);
    });
}

describe('vqb demo without a running Redis', () => {
  it('starts a throwaway redis-server, runs the sample batch to the end on it, and stops it', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vqb-demo-'));
    const nothing = await freePort();
    expect(await probePort('127.0.0.1', nothing)).toBe('refused');
    // No REDIS_URL: the demo looks at its default address, and finds nothing there.
    // No VQ_LANG, no locale: the exports and the run's report in pt-BR, the readable layout.
    const env = {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'warn',
      VQB_TEST_DEFAULT_REDIS_URL: `redis://127.0.0.1:${nothing}`,
      VQ_TIME_ZONE: 'America/Sao_Paulo',
    };
    const began = Date.now();
    const { code, stdout, stderr } = await runVqb(['demo', '--out', join(dir, 'out')], env);
    expect(stderr).toBe('');
    expect(code).toBe(0);

    const started = new RegExp(
      `^no Redis on 127\\.0\\.0\\.1:${nothing}: started a throwaway redis-server on (redis://127\\.0\\.0\\.1:(\\d+)) `,
      'm',
    ).exec(stdout);
    expect(started, stdout).not.toBeNull();
    const [, url, port] = started as RegExpExecArray;
    // The batch ran on that server, to the end.
    expect(stdout).toContain(`Redis at ${url};`);
    expect(stdout).toMatch(/270 done, 5 failed/);
    const csv = /^\s+(\S+\.csv)$/m.exec(stdout)?.[1];
    expect(csv).toBeDefined();
    await access(csv!);
    // The CSV opens in columns: one row per input row (plus the header), the plate and the user's
    // columns first, then the vehicle under pt-BR headers.
    const lines = (await readFile(csv!, 'utf8'))
      .replace(/^\uFEFF/, '')
      .trimEnd()
      .split('\r\n');
    expect(lines[0]!.split(';').slice(0, 6)).toEqual([
      'Placa',
      'cliente',
      'cidade',
      'codigo_interno',
      'Marca',
      'Modelo',
    ]);
    expect(lines[0]).not.toContain('result.result.brand');
    await expectReadableWorkbook(csv!.replace(/\.csv$/, '.xlsx'), began);
    const input = await readFile(join(import.meta.dirname, '../../samples/plates.csv'), 'utf8');
    expect(lines).toHaveLength(input.trimEnd().split('\r\n').length);
    // And the server is gone with the demo.
    expect(await probePort('127.0.0.1', Number(port))).toBe('refused');

    // Apart from that first line, the output is the README's sample (no progress bar: not a terminal).
    const printed = stdout.split('\n').filter((line) => line !== '' && !line.startsWith('no Redis on'));
    const sample = await readmeSample();
    expect(printed).toHaveLength(sample.length);
    printed.forEach((line, i) => {
      expect(line).toMatch(sample[i]!);
    });
  }, 120_000);

  it('keeps the raw columns with VQ_EXPORT_LAYOUT=raw, and speaks English with VQ_LANG=en', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vqb-demo-'));
    const nothing = await freePort();
    const env = {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'warn',
      VQB_TEST_DEFAULT_REDIS_URL: `redis://127.0.0.1:${nothing}`,
      VQ_EXPORT_LAYOUT: 'raw',
      VQ_LANG: 'en',
    };
    const { code, stdout, stderr } = await runVqb(['demo', '--out', join(dir, 'out')], env);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const csv = /^\s+(\S+\.csv)$/m.exec(stdout)![1]!;
    const header = (await readFile(csv, 'utf8')).replace(/^\uFEFF/, '').split('\r\n')[0];
    // The columns exports had before the readable layout, exactly.
    expect(header).toBe(
      'row;input;plate;status;query_id;error_code;error_message;possible_duplicate;duplicate_of;' +
        'same_vehicle_as;reused;enqueued_at;created_at;finished_at;requests;key;cliente;cidade;codigo_interno;' +
        'result.queryId;result.status;result.licensePlate;result.createdAt;result.completedAt;' +
        'result.result.plate;result.result.brand;result.result.model;result.result.year;result.result.modelYear;' +
        'result.result.color;result.result.fuel;result.result.city;result.result.uf;result.result.chassis;' +
        'result.result.renavam;result.result.situation;result.result.restrictions',
    );
    expect(await sheetValues(await readFile(csv.replace(/\.csv$/, '.xlsx')), 'results')).toHaveLength(300);
    // The run's rejects and failures, in English, in the terminal and in the exports.
    expect(stdout).toContain('9 rows rejected:\n  row 10 (ABCD123): expected ABC1234 or ABC1D23\n');
    expect(stdout).toContain('5 plates failed:\n  row 14 (WYH1948): No vehicle found for plate WYH1948.\n');
    const rejects = await readFile(csv.replace(/\.csv$/, '.rejects.csv'), 'utf8');
    expect(rejects).toContain('49;AB-12;BAD_LENGTH;plates have 7 characters, this has 4\r\n');
  }, 120_000);

  it('says in one line how to get redis-server when it is not installed', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vqb-demo-'));
    const nothing = await freePort();
    // A PATH with no redis-server on it: the demo looks it up on its command's environment.
    const env = { PATH: dir, LOG_LEVEL: 'warn', VQB_TEST_DEFAULT_REDIS_URL: `redis://127.0.0.1:${nothing}` };
    const { code, stdout, stderr } = await runVqb(['demo', '--out', join(dir, 'out')], env);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      `vqb: no Redis on 127.0.0.1:${nothing} and redis-server is not installed: \`apt-get install redis-server\` (or set REDIS_URL)\n`,
    );
  });
});
