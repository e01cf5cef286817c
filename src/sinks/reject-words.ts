// Why a row was rejected, in the reader's language: the exports' `message` column and the console
// show these; the `reason` column keeps the stable code (EMPTY, BAD_LENGTH, BAD_FORMAT) for
// programs. Ingest stores the English text; a download in pt-BR is rewritten from the code.
import type { ExportRow, ExportSource, RejectRow } from './types.js';

export type ExportLang = 'en' | 'pt-BR';

const WORDS: Record<ExportLang, Record<string, (count: string) => string>> = {
  en: {
    EMPTY: () => 'no letters or digits',
    BAD_LENGTH: (n) => `plates have 7 characters, this has ${n}`,
    BAD_FORMAT: () => 'expected ABC1234 or ABC1D23',
  },
  'pt-BR': {
    EMPTY: () => 'sem letras nem números',
    BAD_LENGTH: (n) => `placas têm 7 caracteres; esta tem ${n}`,
    BAD_FORMAT: () => 'esperado ABC1234 ou ABC1D23',
  },
};

/** The reject's message in `lang`; a code without words keeps the stored text. */
export function rejectMessage(reason: string, stored: string, lang: ExportLang): string {
  const words = WORDS[lang][reason];
  if (words === undefined) return stored;
  // BAD_LENGTH's stored text ends with the length it found.
  return words(/(\d+)\s*$/.exec(stored)?.[1] ?? '?');
}

/** The same rows and rejects, with every reject message in `lang`. */
export function withRejectWords(source: ExportSource, lang: ExportLang): ExportSource {
  if (lang === 'en') return source;
  return {
    batchId: source.batchId,
    extraColumns: source.extraColumns,
    async *rows(): AsyncIterable<ExportRow> {
      for await (const row of source.rows()) {
        if (row.status === 'rejected' && row.error)
          yield { ...row, error: { ...row.error, message: rejectMessage(row.error.code, row.error.message, lang) } };
        else yield row;
      }
    },
    async *rejects(): AsyncIterable<RejectRow> {
      for await (const reject of source.rejects())
        yield { ...reject, message: rejectMessage(reject.reason, reject.message, lang) };
    },
  };
}
