// A run's report of its rejected rows and failed plates, in the reader's language (VQ_LANG): the
// first few of each with why, and where the rest are. The words are src/words.ts's, the same the
// exports hold, so the terminal and the spreadsheet say the same thing.

import type { ExportSource } from '../sinks/types.js';
import { printable } from '../upstream/bounds.js';
import { type Lang, wordsFor } from '../words.js';

/** Rows shown of each kind; the count and the file say the rest. */
const SHOWN = 5;

/**
 * The lines to print, none when nothing was rejected or failed. `source` is read once, its
 * messages already in `lang` (withWords); `files` are the exports the rest are in.
 */
export async function problemLines(
  source: ExportSource,
  lang: Lang,
  files: { csv?: string; rejects?: string; xlsx?: string },
): Promise<string[]> {
  const say = wordsFor(lang);
  const kinds = {
    rejected: { count: 0, lines: [] as string[], file: files.rejects ?? files.csv ?? files.xlsx },
    failed: { count: 0, lines: [] as string[], file: files.csv ?? files.xlsx },
  };
  for await (const row of source.rows()) {
    if (row.status !== 'rejected' && row.status !== 'failed') continue;
    const kind = kinds[row.status];
    kind.count++;
    if (kind.lines.length < SHOWN)
      kind.lines.push(
        say('run.problem', { row: row.row, input: printable(row.input), message: printable(row.error?.message ?? '') }),
      );
  }
  const out: string[] = [];
  for (const [status, kind] of Object.entries(kinds)) {
    if (kind.count === 0) continue;
    const head = status === 'rejected' ? 'run.rejected' : 'run.failed';
    out.push(kind.count === 1 ? say(`${head}.one`) : say(`${head}.other`, { n: kind.count }));
    out.push(...kind.lines);
    if (kind.count > kind.lines.length)
      out.push(say('run.more', { n: kind.count - kind.lines.length, file: kind.file ?? '-' }));
  }
  return out;
}
