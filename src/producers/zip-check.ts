// The zip under an .xlsx, checked before exceljs (through JSZip) inflates any of it: every entry is
// inflated here, as a stream whose output is counted and dropped, and the workbook is refused as
// soon as the total passes the cap. The sizes a zip declares (central directory, local headers) are
// never trusted: a 1 MB file declaring 4 KB can inflate to gigabytes, and the reader would hold it
// all before noticing. The headers are read only to find where each entry's data starts, the same
// way JSZip finds it (the last end-of-central-directory record, the central directory's method,
// compressed size and local header offset), so what is counted here is what the reader will inflate.
//
// Refused as damaged, rather than read a way the reader might not: zip64 records (no file under the
// upload limits needs them), bytes before or inside the archive that shift its offsets, entries that
// overlap (the "overlapping files" bomb), methods other than stored and deflate, zip-level encryption.
import { constants, createInflateRaw } from 'node:zlib';
import { InputError } from '../errors.js';

/** Entries a workbook may hold: a real one has tens (a thousand sheets would be a few thousand). */
export const MAX_ZIP_ENTRIES = 10_000;

/** Inflated content allowed per byte of file: a real sheet compresses 5–15×, a zip bomb thousands of times. */
export const MAX_INFLATE_RATIO = 100;
/** The least inflated content allowed, whatever the file's size (a small workbook with a large sheet). */
export const MIN_INFLATED_CAP = 64 * 1024 * 1024;
/**
 * The most inflated content allowed, whatever the file's size: what exceljs then parses in memory
 * (~17 bytes of memory per inflated byte measured: 128 MiB of sheet is about 2 GB, half a million rows).
 */
export const MAX_INFLATED_CAP = 128 * 1024 * 1024;

/** The inflated bytes allowed for a file of `fileBytes`: 100× its size, at least 64 MiB, at most 128 MiB. */
export function inflatedCap(fileBytes: number): number {
  return Math.min(MAX_INFLATED_CAP, Math.max(MIN_INFLATED_CAP, fileBytes * MAX_INFLATE_RATIO));
}

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
const MAX16 = 0xffff;
const MAX32 = 0xffffffff;

interface Entry {
  name: string;
  method: number;
  /** Where the entry's data starts (after its local header) and ends (its compressed size). */
  start: number;
  end: number;
  /** Where its local header starts. */
  header: number;
}

export interface ZipCheck {
  /** The entries' names, in central directory order. */
  names: string[];
  /** Bytes the entries really inflate to. */
  inflated: number;
}

/**
 * Walks the zip and inflates every entry, counting; refuses with XLSX_TOO_LARGE as soon as the
 * total passes `cap` (memory stays at zlib's window and one output chunk), with XLSX_INVALID when
 * the archive is damaged or uses a trick listed above.
 */
export async function checkZip(bytes: Buffer, cap: number): Promise<ZipCheck> {
  const { entries, declared } = readEntries(bytes);
  // A zip that admits to a bomb is refused without inflating; one that declares less proves nothing.
  if (declared > cap) throw tooLarge(cap);
  let inflated = 0;
  for (const entry of entries) {
    const data = bytes.subarray(entry.start, entry.end);
    inflated += entry.method === 0 ? data.length : await inflateCounting(data, cap - inflated, entry.name);
    if (inflated > cap) throw tooLarge(cap);
  }
  return { names: entries.map((e) => e.name), inflated };
}

function readEntries(bytes: Buffer): { entries: Entry[]; declared: number } {
  // The last record, as JSZip takes it (a comment could hold an earlier lookalike).
  const eocd = bytes.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (eocd === -1 || eocd + 22 > bytes.length || bytes.readUInt32LE(eocd) !== EOCD)
    throw damaged('the zip archive is cut short (no central directory)');
  const count = bytes.readUInt16LE(eocd + 10);
  const size = bytes.readUInt32LE(eocd + 12);
  const offset = bytes.readUInt32LE(eocd + 16);
  if (count === MAX16 || size === MAX32 || offset === MAX32)
    throw damaged('a zip64 archive (no workbook under the size limits needs one)');
  if (
    bytes.readUInt16LE(eocd + 4) !== 0 ||
    bytes.readUInt16LE(eocd + 6) !== 0 ||
    bytes.readUInt16LE(eocd + 8) !== count
  )
    throw damaged('a zip archive split over several disks');
  if (count > MAX_ZIP_ENTRIES)
    throw new InputError('XLSX_TOO_LARGE', `the zip archive holds ${count} entries, more than ${MAX_ZIP_ENTRIES}`);
  // Bytes before or inside the archive would make JSZip shift every offset: read nothing that way.
  if (offset + size !== eocd) throw damaged('the central directory is not where the archive says');
  const entries: Entry[] = [];
  let declared = 0;
  let at = offset;
  for (let i = 0; i < count; i++) {
    if (at + 46 > eocd || bytes.readUInt32LE(at) !== CENTRAL) throw damaged('its central directory is damaged');
    const flags = bytes.readUInt16LE(at + 8);
    const method = bytes.readUInt16LE(at + 10);
    const compressed = bytes.readUInt32LE(at + 20);
    const nameLength = bytes.readUInt16LE(at + 28);
    const header = bytes.readUInt32LE(at + 42);
    const name = bytes.toString('utf8', at + 46, Math.min(eocd, at + 46 + nameLength));
    const says = bytes.readUInt32LE(at + 24);
    declared += says;
    if (compressed === MAX32 || says === MAX32 || header === MAX32)
      throw damaged('a zip64 entry (no workbook under the size limits needs one)');
    if ((flags & 1) !== 0) throw damaged(`the entry ${show(name)} is encrypted`);
    if (method !== 0 && method !== 8) throw damaged(`the entry ${show(name)} uses compression method ${method}`);
    entries.push(entryAt(bytes, name, method, header, compressed, offset));
    at += 46 + nameLength + bytes.readUInt16LE(at + 30) + bytes.readUInt16LE(at + 32);
  }
  if (at !== eocd) throw damaged('its central directory is damaged');
  // Each entry's header and data are its own: overlapping entries inflate the same bytes many times.
  const sorted = [...entries].sort((a, b) => a.header - b.header);
  for (let i = 1; i < sorted.length; i++) {
    if ((sorted[i] as Entry).header < (sorted[i - 1] as Entry).end) throw damaged('its entries overlap');
  }
  return { entries, declared };
}

function entryAt(
  bytes: Buffer,
  name: string,
  method: number,
  header: number,
  compressed: number,
  limit: number,
): Entry {
  if (header + 30 > limit || bytes.readUInt32LE(header) !== LOCAL)
    throw damaged(`the entry ${show(name)} has no local header where the directory says`);
  const start = header + 30 + bytes.readUInt16LE(header + 26) + bytes.readUInt16LE(header + 28);
  const end = start + compressed;
  if (end > limit) throw damaged(`the entry ${show(name)} runs past the end of the data`);
  return { name, method, start, end, header };
}

/** The zlib binding's synchronous step under node:zlib's streams: one output buffer, written again and again. */
interface ZlibEngine {
  _handle?: { writeSync?: (...args: unknown[]) => void };
  _writeState?: Uint32Array;
  destroyed: boolean;
  close(): void;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

const OUT_CHUNK = 64 * 1024;
/** Output between two turns of the event loop: the inflating runs on it, other requests wait this long at most. */
const YIELD_EVERY = 4 * 1024 * 1024;

/**
 * Inflates `data` (raw deflate), dropping the output, and resolves to its length, stopping as soon
 * as it passes `left`. A stream that does not end inside `data` is damaged.
 *
 * The output goes into one 64 KiB buffer used again for every step, through the synchronous step
 * node:zlib's own inflateSync uses: a stream (createInflateRaw) hands out a new buffer per chunk,
 * and V8 collects those only once tens of MiB of them are waiting, which is the memory this check
 * is here to keep. Node without that step (a future version) gets the stream, correct but hungrier.
 */
async function inflateCounting(data: Buffer, left: number, name: string): Promise<number> {
  const engine = createInflateRaw() as unknown as ZlibEngine;
  const handle = engine._handle;
  const state = engine._writeState;
  if (typeof handle?.writeSync !== 'function' || state === undefined) {
    engine.close();
    return inflateStreaming(data, left, name);
  }
  engine.on('error', () => {}); // seen as `destroyed` below; the event itself comes a tick later
  const out = Buffer.allocUnsafe(OUT_CHUNK);
  let offset = 0;
  let total = 0;
  let sinceYield = 0;
  try {
    for (;;) {
      handle.writeSync(constants.Z_FINISH, data, offset, data.length - offset, out, 0, OUT_CHUNK);
      if (engine.destroyed) throw damaged(`the entry ${show(name)} does not inflate (cut short or not deflate)`);
      const [outLeft = 0, inLeft = 0] = state;
      const produced = OUT_CHUNK - outLeft;
      total += produced;
      offset = data.length - inLeft;
      if (total > left || outLeft !== 0) return total; // over the cap, or the stream's end
      sinceYield += produced;
      if (sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  } finally {
    engine.close();
  }
}

function inflateStreaming(data: Buffer, left: number, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const inflate = createInflateRaw({ chunkSize: OUT_CHUNK });
    let total = 0;
    inflate.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > left) {
        inflate.destroy();
        resolve(total);
      }
    });
    inflate.on('end', () => resolve(total));
    inflate.on('error', (err) => reject(damaged(`the entry ${show(name)} does not inflate: ${err.message}`)));
    inflate.end(data);
  });
}

function tooLarge(cap: number): InputError {
  return new InputError(
    'XLSX_TOO_LARGE',
    `the workbook inflates to more than ${cap} bytes: save the sheet as CSV (read as a stream) and send that`,
  );
}

function damaged(why: string): InputError {
  return new InputError('XLSX_INVALID', `not a readable .xlsx workbook: ${why}`);
}

function show(name: string): string {
  return JSON.stringify(name.length > 60 ? `${name.slice(0, 60)}…` : name);
}
