// A batch's name from its content: the same input under the same name is the same batch, so a
// rerun resumes it instead of paying again. Pure functions, shared by the enqueue step and the
// readers that hash what they read.
import { createHash, randomBytes } from 'node:crypto';
import { foldAccents } from '../plates.js';

/** `<name>-<first 12 hex of sha256(content)>`: readable in file names, stable for the same input. */
export function batchIdFor(name: string, digest: string, force = false): string {
  const base =
    foldAccents(name)
      .replace(/\.[A-Za-z0-9]{1,5}$/, '')
      .replace(/[^A-Za-z0-9_-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40) || 'batch';
  return `${base}-${digest.slice(0, 12)}${force ? `-${randomBytes(3).toString('hex')}` : ''}`;
}

export function digestOf(parts: Iterable<string | Buffer>): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest('hex');
}
