// From a CSV source to records, in three steps that each hold one thing: the byte pump (the source
// as Buffers of at most 64 KiB, read on demand, the first 64 KiB kept for sniffing), the decoder
// step (bytes to text, refusing NUL bytes), and the parser adapter (csv-parse driven one record at
// a time, its errors turned into InputErrors with our codes). csv.ts reads the header and rows.
import { Readable } from 'node:stream';
import { CsvError, type Options, type Parser, parse } from 'csv-parse';
import { parse as parseSync } from 'csv-parse/sync';
import { InputError, isVqbError } from '../errors.js';
import { assertNoNul, type CsvDelimiter, type EncodingDecoder, SNIFF_BYTES } from './csv-sniff.js';

/** The source as Buffers of at most 64 KiB, pulled one at a time; close() releases the source. */
export class BytePump {
  readonly #source: Readable | AsyncIterable<unknown>;
  readonly #chunks: AsyncIterator<Buffer>;
  #ended = false;
  #closed = false;

  constructor(source: Readable | AsyncIterable<unknown>) {
    this.#source = source;
    this.#chunks = bufferChunks(source)[Symbol.asyncIterator]();
  }

  /** Whole chunks until at least `bytes` are read or the source ends (empty when it is empty). */
  async head(bytes: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let read = 0;
    while (read < bytes) {
      const chunk = await this.next();
      if (chunk === undefined) break;
      chunks.push(chunk);
      read += chunk.length;
    }
    return Buffer.concat(chunks);
  }

  /** The next chunk, or undefined once the source has ended. */
  async next(): Promise<Buffer | undefined> {
    if (this.#ended) return undefined;
    const next = await this.#chunks.next();
    if (next.done === true) {
      this.#ended = true;
      return undefined;
    }
    return next.value;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // Destroy a stream directly: return() on a generator waiting for a chunk would wait with it.
    if (this.#source instanceof Readable) this.#source.destroy();
    void this.#chunks.return?.(undefined).catch(() => {});
  }
}

/** Chunks as Buffers of at most 64 KiB (views, not copies), so one huge chunk cannot fill the record queue. */
async function* bufferChunks(source: AsyncIterable<unknown>): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    let buf: Buffer;
    if (Buffer.isBuffer(chunk)) buf = chunk;
    else if (typeof chunk === 'string') buf = Buffer.from(chunk, 'utf8');
    else if (chunk instanceof Uint8Array) buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    else throw new InputError('CSV_UNREADABLE', `expected bytes from the input, got ${typeof chunk}`);
    for (let i = 0; i < buf.length; i += SNIFF_BYTES) yield buf.subarray(i, i + SNIFF_BYTES);
  }
}

/**
 * The decoder step: the sniffed head, then every later chunk of the pump, as text. A NUL byte past
 * the head is CSV_BINARY (the head was checked when sniffed). Closes the pump when done or stopped.
 */
export async function* decodeText(pump: BytePump, head: Buffer, decoder: EncodingDecoder): AsyncGenerator<string> {
  try {
    let offset = head.length;
    const first = decoder.decode(head);
    if (first !== '') yield first;
    for (;;) {
      const chunk = await pump.next();
      if (chunk === undefined) break;
      assertNoNul(chunk, offset);
      offset += chunk.length;
      const text = decoder.decode(chunk);
      if (text !== '') yield text;
    }
    const last = decoder.end();
    if (last !== '') yield last;
  } finally {
    pump.close();
  }
}

export interface CsvRecordsOptions {
  delimiter: CsvDelimiter;
  /** Largest field, in UTF-8 bytes: a record stopped while this much is in one field is CSV_FIELD_TOO_LARGE. */
  maxFieldBytes: number;
  /** csv-parse's max_record_size: the most it buffers for one record. */
  maxRecordBytes: number;
}

/**
 * The parser adapter: csv-parse fed one chunk of text at a time, as the caller asks for records.
 * Records are taken out of csv-parse as it finds them (on_record) rather than read from its stream
 * side: a parse error destroys the stream and would drop records read before it.
 */
export class CsvRecords {
  readonly #text: AsyncGenerator<string>;
  readonly #parser: Parser;
  readonly #syntax: Options;
  readonly #maxField: number;
  readonly #maxRecord: number;
  readonly #queue: string[][] = [];
  #head = 0;
  #recordNo = 0;
  #finished = false;
  #failure: unknown;
  /** Where the record being parsed starts: csv-parse's processed bytes when it found the last one. */
  #recordStart = 0;
  /** The bytes written from (at most a chunk before) #recordStart on, kept to measure a record that grows too large. */
  readonly #recent: Buffer[] = [];
  /** Where #recent[0] starts, in bytes written. */
  #recentStart = 0;

  constructor(text: AsyncGenerator<string>, options: CsvRecordsOptions) {
    this.#text = text;
    this.#maxField = options.maxFieldBytes;
    this.#maxRecord = options.maxRecordBytes;
    this.#syntax = {
      delimiter: options.delimiter,
      record_delimiter: ['\r\n', '\n', '\r'],
      relax_column_count: true,
      relax_quotes: true,
    };
    this.#parser = parse({
      ...this.#syntax,
      skip_empty_lines: false, // blank records are skipped by the reader, counting them
      max_record_size: options.maxRecordBytes,
      on_record: (record: string[], info) => {
        this.#queue.push(record);
        this.#recordStart = info.bytes;
        return null;
      },
    });
    this.#parser.on('error', () => {}); // taken from the write/end callbacks in #feed
    this.#parser.resume();
  }

  /** The number of the record last returned by next(), counting from 1 (blank records included). */
  get recordNo(): number {
    return this.#recordNo;
  }

  /** The next record, or undefined at the end. Records before a failure come out first. */
  async next(): Promise<string[] | undefined> {
    for (;;) {
      const cells = this.#queue[this.#head];
      if (cells !== undefined) {
        this.#head++;
        if (this.#head === this.#queue.length) {
          this.#queue.length = 0;
          this.#head = 0;
        }
        this.#recordNo++;
        return cells;
      }
      if (this.#failure !== undefined) throw this.#failure;
      if (this.#finished) return undefined;
      try {
        const next = await this.#text.next();
        if (next.done === true) this.#finished = true;
        const err = await this.#feed(next.done === true ? undefined : next.value);
        if (err !== undefined) this.#failure = this.#toInputError(err);
      } catch (err) {
        this.#failure = this.#toInputError(err);
      }
    }
  }

  /** Stops parsing and reading text. */
  close(): void {
    this.#parser.destroy();
    void this.#text.return(undefined).catch(() => {});
  }

  /** Writes a chunk (or ends the input); resolves with csv-parse's error, if any. */
  #feed(chunk: string | undefined): Promise<unknown> {
    const parser = this.#parser;
    return new Promise<unknown>((resolve) => {
      if (chunk !== undefined) {
        // As UTF-8 bytes, what csv-parse counts in (a string would be converted the same way).
        const bytes = Buffer.from(chunk, 'utf8');
        this.#keep(bytes);
        parser.write(bytes, (err) => resolve(err ?? undefined));
      } else {
        parser.once('error', resolve);
        parser.end(() => resolve(undefined));
      }
    });
  }

  /** Keeps `bytes` with those written since the record being parsed started; older ones are let go. */
  #keep(bytes: Buffer): void {
    while (this.#recent.length > 0 && this.#recentStart + this.#recent[0]!.length <= this.#recordStart) {
      this.#recentStart += this.#recent.shift()!.length;
    }
    this.#recent.push(bytes);
  }

  /** Our own errors pass through; csv-parse's become InputError with our codes. */
  #toInputError(err: unknown): unknown {
    if (isVqbError(err)) return err;
    const recordNo = this.#recordNo + this.#queue.length - this.#head + 1;
    if (err instanceof CsvError && err.code === 'CSV_MAX_RECORD_SIZE') {
      if (this.#fieldBytes(err) > this.#maxField) {
        return new InputError(
          'CSV_FIELD_TOO_LARGE',
          `record ${recordNo}: a field larger than ${this.#maxField} bytes (maxFieldBytes); an ` +
            `unclosed quote does this too`,
          {
            cause: err,
          },
        );
      }
      return new InputError(
        'CSV_ROW_TOO_LARGE',
        `record ${recordNo}: the row is larger than maxRowBytes; an unclosed quote does this too`,
        { cause: err },
      );
    }
    return new InputError('CSV_UNREADABLE', `cannot parse the CSV at record ${recordNo}: ${messageOf(err)}`, {
      cause: err,
    });
  }

  /**
   * The size of the field being read when csv-parse stopped its record at max_record_size. It
   * stops at the first byte past the limit, counting that field's bytes plus the characters of the
   * fields before it, so the field holds the limit + 1 minus those characters. They are counted by
   * parsing again the record's bytes up to its last delimiter (the error's `bytes`, csv-parse's
   * processed bytes as of that delimiter); without a delimiter yet, the field is the whole record.
   */
  #fieldBytes(err: CsvError): number {
    const end = err['bytes'];
    if (typeof end !== 'number') return 0;
    let before = 0;
    if (end > this.#recordStart) {
      const bytes = Buffer.concat(this.#recent).subarray(
        this.#recordStart - this.#recentStart,
        end - this.#recentStart,
      );
      for (const field of parseSync(bytes, this.#syntax)[0] ?? []) before += field.length;
    }
    return this.#maxRecord + 1 - before;
  }
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
