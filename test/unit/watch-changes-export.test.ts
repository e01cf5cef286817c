// A round's changes as a file, in each format: one change a line (round, plate, field, before,
// after, at), formula-looking text escaped in the CSV as in every export.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { writeChanges } from '../../src/watch/changes-export.js';
import type { ChangeLine } from '../../src/watch/store.js';
import { sheetValues } from '../helpers/xlsx.js';

const CHANGES: ChangeLine[] = [
  {
    round: 2,
    plate: 'ABC1D23',
    field: 'result.restrictions',
    before: '[]',
    after: '["RENAJUD"]',
    at: '2026-11-27T03:00:00.000Z',
  },
  {
    round: 2,
    plate: 'XYZ9876',
    field: 'result.owner',
    before: '',
    after: '=HYPERLINK("x")',
    at: '2026-11-27T03:00:00.000Z',
  },
];

async function bytes(format: 'csv' | 'jsonl' | 'xlsx'): Promise<Buffer> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  await writeChanges(out, CHANGES, format, ';');
  return Buffer.concat(chunks);
}

describe('the changes export', () => {
  it('JSONL: one object a change, the columns in order', async () => {
    const lines = (await bytes('jsonl'))
      .toString('utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toEqual(
      CHANGES.map(({ round, plate, field, before, after, at }) => ({ round, plate, field, before, after, at })),
    );
  });

  it('CSV: a header, a row a change, a formula escaped', async () => {
    const text = (await bytes('csv')).toString('utf8').replace(/^\uFEFF/, '');
    const rows = text.trim().split('\r\n');
    expect(rows[0]).toBe('round;plate;field;before;after;at');
    expect(rows).toHaveLength(3);
    expect(rows[2]).toContain(`'=HYPERLINK`);
  });

  it('.xlsx: sheet "changes" with the same rows', async () => {
    const values = await sheetValues(await bytes('xlsx'), 'changes');
    expect(values[0]).toEqual(['round', 'plate', 'field', 'before', 'after', 'at']);
    expect(values).toHaveLength(3);
    expect(values[1]?.slice(0, 3)).toEqual([2, 'ABC1D23', 'result.restrictions']);
  });
});
