// A round's changes as a file: one change a line (round, plate, field, before, after, at), in
// CSV (the deployment's delimiter, formula-looking text escaped as in every export), JSONL or
// .xlsx. Written beside the round's full export when the round closes, and to standard output
// by `vqb watch changes`.
import { createWriteStream } from 'node:fs';
import { mkdir, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Writable } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import { loadExcel } from '../excel.js';
import { type CsvDelimiter, csvStringifier, escapeFormula } from '../sinks/csv.js';
import type { ChangeLine, ChangesFormat } from './store.js';

export const CHANGE_COLUMNS = ['round', 'plate', 'field', 'before', 'after', 'at'] as const;

const cells = (c: ChangeLine) => [String(c.round), c.plate, c.field, c.before, c.after, c.at];

/** Writes `changes` to `out` in `format` and resolves when all is written (out is ended). */
export async function writeChanges(
  out: Writable,
  changes: readonly ChangeLine[],
  format: ChangesFormat,
  delimiter: CsvDelimiter,
): Promise<void> {
  if (format === 'xlsx') {
    const workbook = new (await loadExcel()).stream.xlsx.WorkbookWriter({
      stream: out,
      useStyles: false,
      useSharedStrings: false,
    });
    const sheet = workbook.addWorksheet('changes');
    sheet.addRow([...CHANGE_COLUMNS]).commit();
    for (const c of changes) sheet.addRow([c.round, c.plate, c.field, c.before, c.after, c.at]).commit();
    sheet.commit();
    await workbook.commit();
    return;
  }
  if (format === 'jsonl') {
    for (const c of changes) out.write(`${JSON.stringify(pick(c))}\n`);
    out.end();
    await finished(out);
    return;
  }
  const csv = csvStringifier(delimiter);
  // pipeline listens for an 'error' on both streams: one nobody listens to exits the process.
  const done = pipeline(csv, out);
  csv.write([...CHANGE_COLUMNS]);
  for (const c of changes) csv.write(cells(c).map((v) => escapeFormula(String(v))));
  csv.end();
  await done;
}

function pick(c: ChangeLine): Record<string, unknown> {
  return { round: c.round, plate: c.plate, field: c.field, before: c.before, after: c.after, at: c.at };
}

/** Writes the file whole or not at all (a temporary name, then renamed). */
export async function writeChangesFile(
  path: string,
  changes: readonly ChangeLine[],
  format: ChangesFormat,
  delimiter: CsvDelimiter,
): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.partial`;
  await writeChanges(createWriteStream(partial), changes, format, delimiter);
  await rename(partial, path);
}
