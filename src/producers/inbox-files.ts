// The drop folder's file handling, kept apart from the watcher's decisions: the directory layout,
// names that are safe to build paths from, moves that never overwrite, reading a file without
// following links, and the one-paragraph explanation left next to a file that could not be used.
// Every path is built as join(dir, basename(name)) and checked to stay inside the root.

import { randomBytes } from 'node:crypto';
import { constants, type FileHandle, lstat, mkdir, open, realpath, rename, writeFile } from 'node:fs/promises';
import { basename, extname, join, resolve, sep } from 'node:path';
import { InputError, VqbError } from '../errors.js';

export const INBOX_DIRS = ['inbox', 'processing', 'archive', 'failed', 'outbox'] as const;
export type InboxDir = (typeof INBOX_DIRS)[number];

/** Extensions read as plate lists (case-insensitive); anything else goes to failed/. */
export const INBOX_EXTENSIONS: readonly string[] = ['.csv', '.txt', '.tsv', '.xlsx'];

/** Longest file name most file systems take, in bytes. */
const MAX_NAME_BYTES = 255;
const ERROR_SUFFIX = '.error.txt';

export interface InboxFolders {
  /** The root, resolved through symlinks once. */
  root: string;
  dirs: Record<InboxDir, string>;
}

export function isInside(root: string, path: string): boolean {
  return resolve(path).startsWith(root.endsWith(sep) ? root : root + sep);
}

/** Creates the root and its folders if missing; refuses a folder that resolves outside the root. */
export async function ensureInboxFolders(rootDir: string): Promise<InboxFolders> {
  await mkdir(rootDir, { recursive: true });
  const root = await realpath(rootDir);
  const dirs = {} as Record<InboxDir, string>;
  for (const name of INBOX_DIRS) {
    const dir = join(root, name);
    await mkdir(dir, { recursive: true });
    if (!isInside(root, await realpath(dir))) {
      throw new VqbError('INBOX_OUTSIDE_ROOT', `${dir} leads outside ${root}: make it a plain folder inside VQ_ROOT`);
    }
    dirs[name] = dir;
  }
  return { root, dirs };
}

/** dir/name, where name must be one plain path component and the result stays inside the root. */
export function pathIn(layout: InboxFolders, dir: InboxDir, name: string): string {
  if (name === '' || name === '.' || name === '..' || basename(name) !== name || name.includes('\0')) {
    throw new VqbError('INBOX_BAD_NAME', `refusing the file name ${JSON.stringify(name)}`);
  }
  const path = join(layout.dirs[dir], basename(name));
  if (!isInside(layout.root, path))
    throw new VqbError('INBOX_BAD_NAME', `${JSON.stringify(name)} leads outside ${layout.root}`);
  return path;
}

export function hasInboxExtension(name: string): boolean {
  return INBOX_EXTENSIONS.includes(extname(name).toLowerCase());
}

/** `.force.` anywhere in the name, or a `force-` prefix (any case): a new batch, paid again. */
export function isForceName(name: string): boolean {
  return /^force-/i.test(name) || /\.force\./i.test(name);
}

/** Dotfiles and `.part` files are still being written (or are not ours): never taken. */
export function isIgnoredName(name: string): boolean {
  return name.startsWith('.') || name.toLowerCase().endsWith('.part') || isSidecar(name);
}

/** `frota.csv.json`: the options of `frota.csv` (inbox-sidecar.ts), never an input of its own. */
function isSidecar(name: string): boolean {
  return name.toLowerCase().endsWith('.json') && hasInboxExtension(name.slice(0, -'.json'.length));
}

/**
 * `prefix + name`, with `~n` before the extension for n > 1, shortened (never inside a character)
 * so that it plus `reserve` bytes still fits in a file name.
 */
export function variantName(name: string, options: { prefix?: string; n?: number; reserve?: number } = {}): string {
  const prefix = options.prefix ?? '';
  const tag = (options.n ?? 1) > 1 ? `~${options.n}` : '';
  let ext = extname(name);
  if (Buffer.byteLength(ext) > 16) ext = '';
  let stem = Array.from(name.slice(0, name.length - ext.length));
  const budget = MAX_NAME_BYTES - (options.reserve ?? 0) - Buffer.byteLength(prefix + tag + ext);
  while (stem.length > 1 && Buffer.byteLength(stem.join('')) > budget) stem = stem.slice(0, -1);
  return `${prefix}${stem.join('')}${tag}${ext}`;
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * The first of `make(1)`, `make(2)`, … that names nothing in `dir` yet (nor its `.error.txt` in
 * failed/). One watcher per root writes these folders, so checking then renaming is enough.
 */
export async function freeName(layout: InboxFolders, dir: InboxDir, make: (n: number) => string): Promise<string> {
  for (let n = 1; n < 10_000; n++) {
    const name = make(n);
    if (await exists(pathIn(layout, dir, name))) continue;
    if (dir === 'failed' && (await exists(pathIn(layout, dir, name + ERROR_SUFFIX)))) continue;
    return name;
  }
  throw new VqbError('INBOX_NAME_EXHAUSTED', `too many files named like ${make(1)} in ${dir}/`);
}

/** Moves a file into `to` under a free variant of `name`; returns the name it got. */
export async function moveInto(
  layout: InboxFolders,
  fromPath: string,
  to: InboxDir,
  name: string,
  options: { prefix?: string; beforeRename?: (target: string) => Promise<void> } = {},
): Promise<string> {
  const reserve = to === 'failed' ? Buffer.byteLength(ERROR_SUFFIX) : 0;
  const prefix = options.prefix ?? '';
  const target = await freeName(layout, to, (n) => variantName(name, { prefix, n, reserve }));
  if (!isInside(layout.root, fromPath)) throw new VqbError('INBOX_BAD_NAME', `${fromPath} is outside ${layout.root}`);
  await options.beforeRename?.(target);
  await rename(fromPath, pathIn(layout, to, target));
  return target;
}

/** `YYYYMMDD-HHMMSS` in UTC, the archive prefix. */
export function stamp(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2024-05-01T12:34:56.789Z
  // 2026-11-27T04:16:46.000Z → 20261127-041646
  return iso.slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
}

const NO_FOLLOW = (constants.O_NOFOLLOW as number | undefined) ?? 0;
const NON_BLOCK = (constants.O_NONBLOCK as number | undefined) ?? 0;

/**
 * The file's bytes in chunks, opened without following a symlink (one swapped in after the lstat
 * is refused, not read) and without blocking on a FIFO. `onChunk` sees every chunk (hashing).
 */
export async function* fileChunks(path: string, onChunk?: (chunk: Buffer) => void): AsyncGenerator<Buffer> {
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | NO_FOLLOW | NON_BLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP')
      throw new InputError('INBOX_NOT_A_FILE', 'it is a symbolic link, which is never followed');
    throw err;
  }
  try {
    if (!(await handle.stat()).isFile()) throw new InputError('INBOX_NOT_A_FILE', 'it is not a regular file');
    for (;;) {
      const buf = Buffer.allocUnsafe(64 * 1024);
      const { bytesRead } = await handle.read(buf, 0, buf.length, null);
      if (bytesRead === 0) return;
      const chunk = buf.subarray(0, bytesRead);
      onChunk?.(chunk);
      yield chunk;
    }
  } finally {
    await handle.close();
  }
}

const ADVICE: Record<string, string> = {
  CSV_BINARY:
    'Open it in Excel or LibreOffice and use "Save as" with the type "CSV UTF-8" (or plain CSV), ' +
    'one plate per row, and drop that file.',
  CSV_UNSUPPORTED_ENCODING: 'Save it again as "CSV UTF-8" (not "Unicode text") and drop that file.',
  CSV_MIXED_ENCODING:
    'Save the whole file again as "CSV UTF-8", so that every row has the same encoding, and drop that file.',
  CSV_EMPTY: 'Check that the right sheet was exported: this file holds no rows.',
  CSV_NO_PLATE_COLUMN:
    'Put the plates in a column headed "placa" or "plate" (or make them the first column) and drop the file again.',
  CSV_FIELD_TOO_LARGE:
    'Look near the row named above for a quote (") that opens a cell and is never closed, fix it ' +
    'and drop the file again.',
  CSV_ROW_TOO_LARGE:
    'Look near the row named above for a quote (") that opens a cell and is never closed, fix it ' +
    'and drop the file again.',
  CSV_UNREADABLE:
    'Open it in a text editor to check that it is a plain CSV file, save it again from the ' +
    'spreadsheet as CSV and drop that file.',
  INBOX_UNSUPPORTED_TYPE:
    `Only ${INBOX_EXTENSIONS.join(', ')} files are read: export the sheet as ` + `CSV and drop that file.`,
  INBOX_NOT_A_FILE: 'Drop a copy of the file itself, not a link to it.',
  XLSX_INVALID:
    'Open it in Excel or LibreOffice and save it again as an Excel workbook (.xlsx) or as "CSV ' +
    'UTF-8", and drop that file.',
  XLSX_ENCRYPTED: 'Remove the password (Excel: File > Info > Protect Workbook), save it and drop that file.',
  XLSX_TOO_LARGE: 'Save the sheet as "CSV UTF-8" (read as a stream, no size limit) or split it, and drop that file.',
  XLSX_NO_SHEET:
    'Save it again from Excel or LibreOffice as an Excel workbook (.xlsx) with the plates on the first sheet.',
  XLSX_EMPTY:
    'Put the plates on the first sheet (the drop folder reads the first visible sheet) and drop the file again.',
  XLSX_NO_PLATE_COLUMN:
    'Put the plates in a column headed "placa" or "plate" (or make them the first column) and drop the file again.',
  XLSX_FIELD_TOO_LARGE:
    'A cell holds more text than a plate list needs: check the row named above and drop the file again.',
};

/** One readable paragraph: what happened, the code, and what to do. */
export function errorReport(file: string, code: string, message: string, at: number): string {
  const advice = ADVICE[code] ?? 'Check the file, save it again as CSV and drop it again.';
  return (
    `The file "${file}" dropped into inbox/ could not be used as a list of plates (${new Date(at).toISOString()}): ` +
    `${message} [${code}]. ${advice} Nothing was queried or paid for this file; it was moved here unchanged ` +
    `and will not be read again, so a corrected copy has to go into inbox/.\n`
  );
}

/** Writes failed/<name>.error.txt through a hidden temporary name (never half a file). */
export async function writeErrorReport(layout: InboxFolders, failedName: string, text: string): Promise<string> {
  const name = failedName + ERROR_SUFFIX;
  const tmp = pathIn(layout, 'failed', `.${randomBytes(6).toString('hex')}.tmp`);
  await writeFile(tmp, text, { flag: 'wx' });
  await rename(tmp, pathIn(layout, 'failed', name));
  return name;
}
