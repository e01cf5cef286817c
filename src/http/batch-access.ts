// What a token's scope reaches of the batches, for both front doors (the API and the console). A
// batch id is scoped by its account: a scoped token finds its own accounts' batch of that id, and
// another account's batch of the same id answers 404, as if absent (never "taken", never its
// callback or results). An administrator's token looks the id up in every account.
import { BatchNotFoundError } from '../errors.js';
import type { BatchInfo, BatchStore } from '../queue/batch/store.js';
import type { BatchViews } from '../queue/batch/view.js';
import type { BatchRef } from '../redis/keys.js';
import type { ArchiveManifest, BatchArchive } from '../sinks/archive.js';
import type { Scope } from './auth.js';

/** The accounts a scope's batch ids are looked up in (undefined: an administrator's, every account). */
export function scopeAccounts(scope: Scope): readonly string[] | undefined {
  return scope.admin ? undefined : scope.accounts;
}

export interface BatchAccess {
  /** The batch of that id in the scope's accounts; BatchNotFoundError otherwise. */
  batch(scope: Scope, id: string): Promise<BatchInfo>;
  /**
   * The archive of that id in the scope's accounts; undefined while the batch is in Redis;
   * BatchNotFoundError when neither.
   */
  archived(scope: Scope, id: string): Promise<ArchiveManifest | undefined>;
  /** The scope's batch of that id, live or archived, as a ref (exports, deletes and retries take it). */
  ref(scope: Scope, id: string): Promise<BatchRef>;
}

export function batchAccess(
  stores: { batches: BatchStore; batchViews: BatchViews },
  archive: Pick<BatchArchive, 'manifestFor'>,
): BatchAccess {
  const batch = (scope: Scope, id: string) => stores.batchViews.get(id, scopeAccounts(scope));
  const archived = async (scope: Scope, id: string) => {
    const ref = await stores.batches.find(id, scopeAccounts(scope));
    if (ref !== undefined && (await stores.batches.exists(ref))) return undefined;
    const manifest = await archive.manifestFor(id, scopeAccounts(scope));
    if (manifest === undefined) throw new BatchNotFoundError(id);
    return manifest;
  };
  const ref = async (scope: Scope, id: string): Promise<BatchRef> => {
    const manifest = await archived(scope, id);
    if (manifest !== undefined) return { id, account: manifest.batch.account };
    const info = await batch(scope, id);
    return { id: info.id, account: info.account };
  };
  return { batch, archived, ref };
}
