// Which files in inbox/ are complete. Polling cannot see a writer close a file, so a file is taken
// once its size, modification time and inode have not changed for `stableMs` across scans, or at
// once when it is a `.part` file (seen in the previous scan, same inode) renamed to its final name.
// Only regular files are candidates: links, folders, sockets and FIFOs are logged once and left.
import type { BigIntStats } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import type { Logger } from '../logger.js';
import { type InboxFolders, isIgnoredName, pathIn } from './inbox-files.js';

export interface ReadyFile {
  name: string;
  path: string;
  ino: bigint;
}

interface Seen {
  size: bigint;
  mtimeNs: bigint;
  ino: bigint;
  since: number;
}

export class InboxObserver {
  readonly #stableMs: number;
  readonly #log: Logger;
  readonly #seen = new Map<string, Seen>();
  readonly #skipped = new Map<string, string>();
  #partInodes = new Set<string>();

  constructor(options: { stableMs: number; log: Logger }) {
    this.#stableMs = options.stableMs;
    this.#log = options.log;
  }

  /** Files seen and not yet stable. */
  get waiting(): number {
    return this.#seen.size;
  }

  /** Forget a file once it has been taken (a new file of the same name starts over). */
  forget(name: string): void {
    this.#seen.delete(name);
  }

  /** One look at inbox/ at time `at`: the files complete enough to take, in directory order. */
  async ready(layout: InboxFolders, at: number): Promise<ReadyFile[]> {
    const names = await readdir(layout.dirs.inbox);
    const present = new Set(names);
    for (const name of [...this.#seen.keys(), ...this.#skipped.keys()]) {
      if (!present.has(name)) {
        this.#seen.delete(name);
        this.#skipped.delete(name);
      }
    }
    const previousParts = this.#partInodes;
    this.#partInodes = new Set();
    const ready: ReadyFile[] = [];
    for (const name of names) {
      if (name.startsWith('.')) continue; // dotfiles: editors' and rsync's temporary files
      const path = pathIn(layout, 'inbox', name);
      let st: BigIntStats;
      try {
        st = await lstat(path, { bigint: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
          this.#skip(name, `cannot be examined (${(err as Error).message})`);
        continue;
      }
      if (isIgnoredName(name)) {
        if (st.isFile()) this.#partInodes.add(`${st.dev}:${st.ino}`);
        continue;
      }
      if (!st.isFile()) {
        this.#skip(
          name,
          st.isSymbolicLink()
            ? 'a symbolic link (never followed)'
            : st.isDirectory()
              ? 'a folder'
              : 'not a regular file',
        );
        continue;
      }
      if (st.nlink > 1n) {
        // Its bytes also live elsewhere, maybe outside the root.
        this.#skip(name, 'a hard link to another file (drop a copy instead)');
        continue;
      }
      const renamed = previousParts.has(`${st.dev}:${st.ino}`);
      const prev = this.#seen.get(name);
      const unchanged =
        prev !== undefined && prev.size === st.size && prev.mtimeNs === st.mtimeNs && prev.ino === st.ino;
      if (!unchanged) this.#seen.set(name, { size: st.size, mtimeNs: st.mtimeNs, ino: st.ino, since: at });
      const stable = this.#stableMs === 0 || (unchanged && at - prev.since >= this.#stableMs);
      if (renamed || stable) ready.push({ name, path, ino: st.ino });
    }
    return ready;
  }

  #skip(name: string, why: string): void {
    if (this.#skipped.get(name) === why) return;
    this.#skipped.set(name, why);
    this.#log.info({ file: name }, `inbox: skipped ${JSON.stringify(name)}: ${why}`);
  }
}
