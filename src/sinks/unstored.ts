// The last resort for paid answers: a stop that could not wait for Redis any longer (it was gone
// when the operator stopped `vqb run`) writes what the process still held, one JSON line per plate,
// beside the batch's exports. Each line keeps the query id (poll it again for free) and, for a
// finished plate, its outcome (the result itself); nothing paid is dropped unsaid.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeDir } from './file-sink.js';

export interface UnstoredEntry {
  kind: 'outcome' | 'queryId';
  account: string;
  batchId: string;
  plate: string;
  queryId?: string;
  outcome?: unknown;
  since: number;
}

/** Writes `<outDir>/<batch>.unstored-<time>.jsonl` and returns its path. */
export async function writeUnstored(
  outDir: string,
  batchId: string,
  entries: readonly UnstoredEntry[],
  now: number,
): Promise<string> {
  await makeDir({ mkdir }, outDir);
  const stamp = new Date(now)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const path = join(outDir, `${batchId}.unstored-${stamp}.jsonl`);
  const lines = entries.map((e) => JSON.stringify({ ...e, since: new Date(e.since).toISOString() }));
  await writeFile(path, `${lines.join('\n')}\n`, { mode: 0o600 });
  return path;
}
