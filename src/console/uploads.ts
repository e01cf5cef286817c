// A file uploaded in the console, read and judged but not yet a batch: kept in Redis for
// UPLOAD_TTL_MS between the estimate and the operator's confirmation, then ingested exactly as the
// API would have ingested it. Nothing is enqueued before the confirmation; an upload never
// confirmed simply expires. Each upload belongs to the session that made it.
//
// Issue 35 (8): three unconfirmed 10 MB uploads once took Redis from 3 to 62 MB, and under
// `noeviction` one session could have stopped every account's writes. Staging now goes through
// one script (console-stage-2.lua) that checks a ledger of every staged upload, with its owner and
// size, against the caps (limits.ts): per session (count, bytes) and for the whole server (count,
// bytes). The ledger drops the expired as it goes; a confirm takes its upload out of it.
import { randomBytes } from 'node:crypto';
import { clock } from '../clock.js';
import { ApiError } from '../http/errors.js';
import type { CostEstimate } from '../producers/dry-run.js';
import type { InputRow } from '../producers/types.js';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import type { ConsoleLimits } from './limits.js';

export const UPLOAD_TTL_MS = 60 * 60_000;

export interface StagedUpload {
  /** The session that uploaded it (hash of its id): another session cannot confirm it. */
  owner: string;
  batchId: string;
  name: string;
  digest: string;
  account: string;
  /** A pool of keys: every key of it serves the batch (`account` is its home). */
  pool?: string;
  extraColumns: string[];
  force: boolean;
  maxCreates?: number;
  reuseWithinMs?: number;
  priority?: 'interactive' | 'normal' | 'bulk';
  weight?: number;
  /** The deadline as read at upload (epoch ms), judged again on confirm. */
  deadline?: number;
  /** Already checked (checkCallbackUrl); ingest checks it again on confirm. */
  callbackUrl?: string;
  /** What the estimate page shows. */
  estimate: CostEstimate;
  rows: InputRow[];
}

type StageLimits = Pick<
  ConsoleLimits,
  'stagedPerSession' | 'stagedBytesPerSession' | 'stagedTotal' | 'stagedBytesTotal'
>;

/** What a refusal says, by what is full (the console words it in the page's language: err.TOO_MANY_UPLOADS). */
const FULL: Record<string, string> = {
  SESSION_COUNT: 'this session already has as many unconfirmed uploads as it may hold',
  SESSION_BYTES: 'this session’s unconfirmed uploads already hold as much as it may',
  TOTAL_COUNT: 'the server holds as many unconfirmed uploads as it may',
  TOTAL_BYTES: 'the server’s unconfirmed uploads already hold as much as it may',
};

export class StagedUploads {
  readonly #redis: Scripted<'console-stage'>;
  readonly #keys: VqbKeys;
  readonly #limits: StageLimits;
  readonly #now: () => number;
  /** The size each upload read had in Redis: its ledger member names it. */
  readonly #sizes = new WeakMap<StagedUpload, number>();

  constructor(redis: RedisClient, keys: VqbKeys, limits: StageLimits, now: () => number = clock.now) {
    this.#redis = withScripts(redis, ['console-stage']);
    this.#keys = keys;
    this.#limits = limits;
    this.#now = now;
  }

  /** Stages the upload; throws ApiError TOO_MANY_UPLOADS (429) when a cap would be passed. */
  async put(upload: StagedUpload): Promise<string> {
    const id = randomBytes(16).toString('hex');
    const text = JSON.stringify(upload);
    const l = this.#limits;
    const answer = await this.#redis.vqbConsoleStage(
      this.#keys.consoleUpload(id),
      this.#keys.consoleUploads,
      this.#now(),
      UPLOAD_TTL_MS,
      text,
      ledgerMember(upload.owner, id, Buffer.byteLength(text)),
      upload.owner,
      l.stagedPerSession,
      l.stagedBytesPerSession,
      l.stagedTotal,
      l.stagedBytesTotal,
    );
    if (answer !== 'OK') throw refusal(String(answer));
    return id;
  }

  /**
   * Throws TOO_MANY_UPLOADS when the owner, or the server, is already at a count or bytes cap:
   * asked before the file is read, so a full session is not read 10 MB to be refused. `put`
   * remains the authority (two uploads at once, and the new one's size).
   */
  async checkRoom(owner: string): Promise<void> {
    const members = await this.#redis.zrangebyscore(this.#keys.consoleUploads, `(${this.#now()}`, '+inf');
    let count = 0;
    let bytes = 0;
    let total = 0;
    for (const member of members) {
      const [who, , size] = member.split(':');
      total += Number(size) || 0;
      if (who !== owner) continue;
      count++;
      bytes += Number(size) || 0;
    }
    const l = this.#limits;
    const full =
      count >= l.stagedPerSession
        ? 'SESSION_COUNT'
        : bytes >= l.stagedBytesPerSession
          ? 'SESSION_BYTES'
          : members.length >= l.stagedTotal
            ? 'TOTAL_COUNT'
            : total >= l.stagedBytesTotal
              ? 'TOTAL_BYTES'
              : undefined;
    if (full !== undefined) throw refusal(full);
  }

  async get(id: string, owner: string): Promise<StagedUpload | undefined> {
    if (!/^[0-9a-f]{32}$/.test(id)) return undefined;
    const text = await this.#redis.get(this.#keys.consoleUpload(id));
    if (text === null) return undefined;
    const upload = JSON.parse(text) as StagedUpload;
    if (upload.owner !== owner) return undefined;
    this.#sizes.set(upload, Buffer.byteLength(text));
    return upload;
  }

  /**
   * Takes the upload away (confirm), as `get` read it: true for the one caller that got it. Its
   * room under the caps is freed.
   */
  async take(id: string, upload: StagedUpload): Promise<boolean> {
    const bytes = this.#sizes.get(upload) ?? Buffer.byteLength(JSON.stringify(upload));
    const member = ledgerMember(upload.owner, id, bytes);
    const [deleted] =
      (await this.#redis.multi().del(this.#keys.consoleUpload(id)).zrem(this.#keys.consoleUploads, member).exec()) ??
      [];
    return deleted?.[1] === 1;
  }
}

function refusal(full: string): ApiError {
  const why = FULL[full] ?? 'no room for another unconfirmed upload';
  return new ApiError(
    'TOO_MANY_UPLOADS',
    `${why}: confirm one, or wait for them to expire (an hour after each upload)`,
  );
}

function ledgerMember(owner: string, id: string, bytes: number): string {
  return `${owner}:${id}:${bytes}`;
}
