// A dropped file's own options: a sidecar `<name>.json` beside it in inbox/ (`frota.csv.json` for
// `frota.csv`), e.g. `{"deadline": "18:00"}` (docs/plans.md). The scan never takes a sidecar as
// input (inbox-files.ts isIgnoredName); the file's take reads it, keeps what it said in the file's
// processing record (so a restart mid-file still knows it) and removes it.
import { readFile, unlink } from 'node:fs/promises';
import { InputError } from '../errors.js';
import { type InboxFolders, pathIn } from './inbox-files.js';

/** What a sidecar may say. */
export interface SidecarOptions {
  deadline?: string | number;
}

const KNOWN = ['deadline'];
const MAX_BYTES = 4_096;

/**
 * The sidecar of `name` in inbox/, read and checked; undefined when there is none.
 * INBOX_BAD_SIDECAR when it cannot be used.
 */
export async function readSidecar(layout: InboxFolders, name: string): Promise<SidecarOptions | undefined> {
  const path = pathIn(layout, 'inbox', `${name}.json`);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const bad = (why: string) => new InputError('INBOX_BAD_SIDECAR', `the sidecar ${name}.json ${why}`);
  if (Buffer.byteLength(text) > MAX_BYTES) throw bad(`is over ${MAX_BYTES} bytes`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw bad('is not JSON (write e.g. {"deadline": "18:00"})');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw bad('is not a JSON object');
  const unknown = Object.keys(parsed).filter((k) => !KNOWN.includes(k));
  if (unknown.length > 0)
    throw bad(`has fields vqb does not take: ${unknown.join(', ')} (it takes: ${KNOWN.join(', ')})`);
  const { deadline } = parsed as { deadline?: unknown };
  if (deadline !== undefined && typeof deadline !== 'string' && typeof deadline !== 'number')
    throw bad('has a deadline that is neither text nor a number');
  return deadline !== undefined ? { deadline: deadline as string | number } : {};
}

/** The sidecar's work is done once its options are in the file's record. */
export async function removeSidecar(layout: InboxFolders, name: string): Promise<void> {
  await unlink(pathIn(layout, 'inbox', `${name}.json`)).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}
