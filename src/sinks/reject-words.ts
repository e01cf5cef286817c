// Why a row was rejected or a plate failed, in the reader's language (src/words.ts, the one
// catalogue): the exports' message columns and the run's report show these; the `reason` and
// `error_code` columns keep the stable codes (EMPTY, BAD_LENGTH, VEHICLE_NOT_FOUND…) for programs.
// Ingest and the workers store English (or the upstream's own text); an export in another language
// is rewritten from the code, and a code the catalogue does not know keeps the stored text.
import { type Lang, rejectText, rowErrorText } from '../words.js';
import type { ExportRow, ExportSource, RejectRow } from './types.js';

/** A row's error message in `lang`: rejects by their reason, failures by their code. */
function rowMessage(row: ExportRow, lang: Lang): string | undefined {
  if (row.error === undefined) return undefined;
  if (row.status === 'rejected') return rejectText(row.error.code, row.error.message, lang);
  if (row.status === 'failed') return rowErrorText(row.error.code, row.error.message, lang);
  return row.error.message;
}

/**
 * The same rows and rejects, with every reject and failure message in `lang`. English is what is
 * stored (vqb's own words, or the upstream's, which may say more: the plate, its own reason), so
 * an English export is the stored text as it is, byte for byte what the archive holds.
 */
export function withWords(source: ExportSource, lang: Lang): ExportSource {
  if (lang === 'en') return source;
  return {
    ...source,
    async *rows(): AsyncIterable<ExportRow> {
      for await (const row of source.rows()) {
        const message = rowMessage(row, lang);
        if (row.error !== undefined && message !== undefined && message !== row.error.message)
          yield { ...row, error: { ...row.error, message } };
        else yield row;
      }
    },
    async *rejects(): AsyncIterable<RejectRow> {
      for await (const reject of source.rejects())
        yield { ...reject, message: rejectText(reject.reason, reject.message, lang) };
    },
  };
}
