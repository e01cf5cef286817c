// The shapes that live in Redis: what a job carries between activations, and the terminal outcome
// stored per (batch, plate) before the job completes. Both are plain JSON and never hold the key.
import type { PriorityClass } from '../redis/keys.js';
import type { KeptAnswer } from '../upstream/answers.js';

/** How urgent a batch is (its lane); defined with the ids key names are made of. */
export type { PriorityClass };

/**
 * CREATE: not sent yet. CREATING: a create request may have left (crash window). POLL: we hold a
 * queryId. UNREAD: the create was made and paid, and its answer held no id vqb could read: the
 * answer is kept (`heldAnswer`) and read again when the settings change; never created again.
 */
export type JobStep = 'create' | 'creating' | 'poll' | 'unread';

export interface PlateJobData {
  /** The account whose key, limits and queue the plate uses; for a pooled batch, the batch's home (its keys' slot). */
  account: string;
  /**
   * A pooled batch's plate created by another key of the pool (docs/plans.md): the account whose
   * key, limits and queue the plate uses, while `account` names where its batch lives. Absent: `account`.
   */
  key?: string;
  batchId: string;
  cls: PriorityClass;
  /** Normalised plate (A–Z, 0–9). */
  plate: string;
  product: string;
  step: JobStep;
  queryId?: string;
  /** Epoch ms of the create that produced queryId. */
  createdAt?: number;
  /** Epoch ms when the job first entered `creating`. */
  creatingAt?: number;
  /** Names one send of the create (queue/job-fence.ts): only its sender may store the answer. */
  createId?: string;
  /** Epoch ms after which polling gives up (POLL_TIMEOUT). */
  pollDeadline?: number;
  /** Polls made so far for this query. */
  polls: number;
  /** Upstream requests made for this job (creates + polls), across attempts. */
  requests: number;
  /** Epoch ms of the last poll that found the query pending. */
  lastPendingAt?: number;
  /** A create was sent again after its first answer was lost: the upstream may have charged twice. */
  possibleDuplicate?: boolean;
  /** The last answer vqb could not read (redacted, cut to a few KB): the plate waits for settings that read it. */
  heldAnswer?: KeptAnswer;
  /** Held by a spending cap: the batch's own ('batch', until raised) or the account's (until the reset). */
  heldBy?: 'batch' | 'day' | 'month';
}

export type OutcomeStatus = 'done' | 'failed';

export interface OutcomeError {
  code: string;
  message: string;
  /** HTTP status of the upstream answer, where there was one. */
  httpStatus?: number;
}

/** The terminal record of one plate in one batch. Exports are rebuilt from these alone. */
export interface Outcome {
  batchId: string;
  plate: string;
  status: OutcomeStatus;
  queryId?: string;
  /** The upstream's whole body for a finished query. */
  result?: unknown;
  error?: OutcomeError;
  /** Epoch ms. */
  enqueuedAt?: number;
  createdAt?: number;
  finishedAt: number;
  /** Upstream requests spent on this plate (creates + polls). */
  requests: number;
  polls: number;
  attempts: number;
  possibleDuplicate?: boolean;
  /** Answered from a result stored earlier (no upstream request); its age when reused. */
  reused?: boolean;
  reusedAgeMs?: number;
  /** The account (never its secret) whose key created the query: differs from the batch's for a pooled batch. */
  key?: string;
}

/** The account whose key, pace and queue the job uses (a pooled batch's plate may use another key than its home's). */
export function keyOf(data: Pick<PlateJobData, 'account' | 'key'>): string {
  return data.key ?? data.account;
}

/** The job's batch as its keys need it (on the job's account's slot). */
export function batchOf(data: Pick<PlateJobData, 'batchId' | 'account'>): { id: string; account: string } {
  return { id: data.batchId, account: data.account };
}
