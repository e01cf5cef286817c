// A file uploaded in the console, read and judged but not yet a batch: kept in Redis for
// UPLOAD_TTL_MS between the estimate and the operator's confirmation, then ingested exactly as the
// API would have ingested it. Nothing is enqueued before the confirmation; an upload never
// confirmed simply expires. Each upload belongs to the session that made it.
import { randomBytes } from 'node:crypto';
import type { CostEstimate } from '../producers/dry-run.js';
import type { InputRow } from '../producers/types.js';
import type { VqbKeys } from '../queue/keys.js';
import type { RedisClient } from '../queue/redis.js';

export const UPLOAD_TTL_MS = 60 * 60_000;

export interface StagedUpload {
  /** The session that uploaded it (hash of its id): another session cannot confirm it. */
  owner: string;
  batchId: string;
  name: string;
  digest: string;
  account: string;
  extraColumns: string[];
  force: boolean;
  maxCreates?: number;
  reuseWithinMs?: number;
  priority?: 'interactive' | 'normal' | 'bulk';
  weight?: number;
  /** Already checked (checkCallbackUrl); ingest checks it again on confirm. */
  callbackUrl?: string;
  /** What the estimate page shows. */
  estimate: CostEstimate;
  rows: InputRow[];
}

export class StagedUploads {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;

  constructor(redis: RedisClient, keys: VqbKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async put(upload: StagedUpload): Promise<string> {
    const id = randomBytes(16).toString('hex');
    await this.#redis.set(this.#keys.consoleUpload(id), JSON.stringify(upload), 'PX', UPLOAD_TTL_MS);
    return id;
  }

  async get(id: string, owner: string): Promise<StagedUpload | undefined> {
    if (!/^[0-9a-f]{32}$/.test(id)) return undefined;
    const text = await this.#redis.get(this.#keys.consoleUpload(id));
    if (text === null) return undefined;
    const upload = JSON.parse(text) as StagedUpload;
    return upload.owner === owner ? upload : undefined;
  }

  /** Takes the upload away (confirm): true for the one caller that got it. */
  async take(id: string): Promise<boolean> {
    return (await this.#redis.del(this.#keys.consoleUpload(id))) === 1;
  }
}
