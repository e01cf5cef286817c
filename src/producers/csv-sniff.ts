// What kind of bytes a plate file holds, decided from its first 64 KiB: not a CSV at all (binary,
// a zipped .xlsx, UTF-16), which delimiter, and which encoding. Encoding is decided lazily by
// EncodingDecoder, because a file whose first rows are plain ASCII may only show its accents
// thousands of rows later.

import { TextDecoder } from 'node:util';
import { InputError } from '../errors.js';

export type CsvDelimiter = ',' | ';' | '\t';
export type CsvEncoding = 'utf-8' | 'windows-1252';

/** How much of the start of a file the sniffers look at. */
export const SNIFF_BYTES = 64 * 1024;

const UTF8_BOM = [0xef, 0xbb, 0xbf] as const;

const MAGIC: readonly { bytes: readonly number[]; what: string }[] = [
  { bytes: [0x50, 0x4b, 0x03, 0x04], what: 'a ZIP archive (an .xlsx workbook is one): save the sheet as CSV' },
  { bytes: [0x50, 0x4b, 0x05, 0x06], what: 'an empty ZIP archive' },
  { bytes: [0xd0, 0xcf, 0x11, 0xe0], what: 'an old Excel .xls workbook: save the sheet as CSV' },
  { bytes: [0x1f, 0x8b], what: 'a gzip file: decompress it first' },
  { bytes: [0x25, 0x50, 0x44, 0x46, 0x2d], what: 'a PDF document' },
];

function startsWith(buf: Buffer, bytes: readonly number[]): boolean {
  return buf.length >= bytes.length && bytes.every((b, i) => buf[i] === b);
}

export function hasUtf8Bom(buf: Buffer): boolean {
  return startsWith(buf, UTF8_BOM);
}

/**
 * Throws InputError when the start of the input is clearly not text: known binary signatures,
 * UTF-16/32 (Excel's "Unicode text"), NUL bytes, or more than 1% control characters (random bytes).
 */
export function assertLooksLikeText(buf: Buffer): void {
  if (startsWith(buf, [0xff, 0xfe]) || startsWith(buf, [0xfe, 0xff]) || startsWith(buf, [0, 0, 0xfe, 0xff])) {
    throw new InputError(
      'CSV_UNSUPPORTED_ENCODING',
      'the file is UTF-16/UTF-32 ("Unicode text"): save it as "CSV UTF-8" or plain CSV',
    );
  }
  for (const { bytes, what } of MAGIC) {
    if (startsWith(buf, bytes)) throw new InputError('CSV_BINARY', `not a CSV file: this is ${what}`);
  }
  const nul = buf.indexOf(0);
  if (nul !== -1) throw new InputError('CSV_BINARY', `not a CSV file: NUL byte at offset ${nul}`);
  let control = 0;
  for (const b of buf) {
    // Tab, LF, FF, CR and SUB (a DOS end-of-file marker) appear in real text files.
    if ((b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0c && b !== 0x0d && b !== 0x1a) || b === 0x7f) control++;
  }
  if (control > 2 && control / buf.length > 0.01) {
    throw new InputError('CSV_BINARY', `not a CSV file: ${control} control bytes in the first ${buf.length}`);
  }
}

/** Throws CSV_BINARY when a later chunk holds a NUL byte (text never does). */
export function assertNoNul(chunk: Buffer, offset: number): void {
  const nul = chunk.indexOf(0);
  if (nul !== -1) throw new InputError('CSV_BINARY', `not a CSV file: NUL byte at offset ${offset + nul}`);
}

const CANDIDATES: readonly CsvDelimiter[] = [';', ',', '\t'];

/**
 * Pick the delimiter from the first records of `text` (any ASCII-compatible decoding will do).
 * For each candidate, count it outside quotes per record; the winner is the one whose count in the
 * first record is non-zero and repeated by the most following records (ties: the larger count in
 * the first record, then `;` before `,` before tab, since pt-BR Excel writes `;` and `,` is then a
 * decimal separator). No candidate at all (a one-column file) means `,`.
 */
export function detectDelimiter(text: string, maxRecords = 50): CsvDelimiter {
  const counts: Record<CsvDelimiter, number>[] = [];
  let current: Record<CsvDelimiter, number> = { ';': 0, ',': 0, '\t': 0 };
  let blank = true;
  let inQuotes = false;
  for (let i = 0; i < text.length && counts.length < maxRecords; i++) {
    const c = text[i];
    if (c === '"') {
      inQuotes = !inQuotes;
      blank = false;
    } else if (inQuotes) {
    } else if (c === '\n' || c === '\r') {
      if (!blank) counts.push(current);
      current = { ';': 0, ',': 0, '\t': 0 };
      blank = true;
    } else if (c === ';' || c === ',' || c === '\t') {
      current[c]++;
      blank = false;
    } else if (c !== ' ') {
      blank = false;
    }
  }
  // A sniff window that ends inside the first record still tells us something.
  if (counts.length === 0 && !blank) counts.push(current);
  let best: CsvDelimiter = ',';
  let bestScore = 0;
  let bestFirst = 0;
  for (const d of CANDIDATES) {
    const first = counts[0]?.[d] ?? 0;
    if (first === 0) continue;
    const score = counts.filter((c) => c[d] === first).length;
    if (score > bestScore || (score === bestScore && first > bestFirst)) {
      best = d;
      bestScore = score;
      bestFirst = first;
    }
  }
  return best;
}

/**
 * Bytes → text, deciding between UTF-8 and Windows-1252 at the first non-ASCII bytes: if they are
 * valid UTF-8 the file is UTF-8 (a BOM decides at once), otherwise Windows-1252 (what pt-BR Excel
 * writes for "CSV (separado por vírgulas)"). Until then both decodings agree, so nothing is lost by
 * waiting. Once UTF-8 is chosen, invalid bytes later on are an error (CSV_MIXED_ENCODING) rather
 * than silently replaced. Multi-byte sequences split across chunks are handled by `stream: true`.
 */
export class EncodingDecoder {
  encoding: CsvEncoding | undefined;
  private decoder: TextDecoder | undefined;
  private held: Buffer = Buffer.alloc(0);
  private bytesIn = 0;
  private readonly onDecide: (encoding: CsvEncoding) => void;

  constructor(onDecide: (encoding: CsvEncoding) => void = () => {}) {
    this.onDecide = onDecide;
  }

  decode(chunk: Buffer): string {
    return this.push(chunk, false);
  }

  end(): string {
    return this.push(Buffer.alloc(0), true);
  }

  private decide(encoding: CsvEncoding): void {
    this.encoding = encoding;
    // TextDecoder('utf-8') drops a leading BOM itself (ignoreBOM defaults to false).
    this.decoder = encoding === 'utf-8' ? new TextDecoder('utf-8', { fatal: true }) : new TextDecoder('windows-1252');
    this.onDecide(encoding);
  }

  private push(chunk: Buffer, final: boolean): string {
    let buf = chunk;
    if (this.decoder === undefined) {
      buf = this.held.length > 0 ? Buffer.concat([this.held, chunk]) : chunk;
      this.held = Buffer.alloc(0);
      if (
        this.bytesIn === 0 &&
        buf.length < 3 &&
        !final &&
        UTF8_BOM.slice(0, buf.length).every((b, i) => buf[i] === b)
      ) {
        this.held = buf; // could still become a BOM
        return '';
      }
      if (this.bytesIn === 0 && hasUtf8Bom(buf)) {
        this.decide('utf-8');
      } else {
        const firstHigh = buf.findIndex((b) => b >= 0x80);
        if (firstHigh === -1) {
          this.bytesIn += buf.length;
          return buf.toString('latin1');
        }
        if (!final && buf.length - firstHigh < 4) {
          // Too few bytes to tell a UTF-8 sequence from Windows-1252: wait for the next chunk.
          this.held = buf.subarray(firstHigh);
          this.bytesIn += firstHigh;
          return buf.subarray(0, firstHigh).toString('latin1');
        }
        this.decide(isUtf8Prefix(buf.subarray(firstHigh), final) ? 'utf-8' : 'windows-1252');
      }
    }
    const decoder = this.decoder as TextDecoder;
    try {
      const text = decoder.decode(buf, { stream: !final });
      this.bytesIn += buf.length;
      return text;
    } catch (cause) {
      throw new InputError(
        'CSV_MIXED_ENCODING',
        `invalid UTF-8 near byte ${this.bytesIn}: the file starts as UTF-8 but has other bytes ` +
          `later (two files pasted together?); save it again with one encoding`,
        { cause },
      );
    }
  }
}

function isUtf8Prefix(buf: Buffer, final: boolean): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(buf, { stream: !final });
    return true;
  } catch {
    return false;
  }
}
