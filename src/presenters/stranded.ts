// Plates a stopped key holds. A query created (and paid) with one key is read with that key only:
// vqb never assumes another key, even one of the same pool, may read a query it did not create.
// When a key stops with such queries (expired, revoked, a permission gone, an answer vqb cannot
// read, an upstream that does not answer), its plates wait for it; `vqb run`, `vqb status`, the
// API and the console say how many and what to do, and a run whose other plates are all finished
// ends (exit 3) instead of waiting for good (issue 43).
import type { BatchInfo } from '../queue/batch/store.js';
import { OPERATOR_PAUSE } from '../queue/line.js';
import type { QueueServices } from '../services.js';
import { counted } from './text.js';

/** A key that stopped with paid plates of the batch on it. */
export interface StrandedKey {
  account: string;
  /** The batch's plates created with this key and not read yet. */
  plates: number;
  /** Why the key stopped: its pause code, or UPSTREAM_UNREACHABLE. */
  code: string;
  message: string;
  /** What brings them back, as a command or in words. */
  resume: string;
}

type Sources = Pick<QueueServices, 'accounts' | 'inflight' | 'config'>;

/** The `vqb resume` that lifts an account's pause (its name only where there is more than one account). */
export function resumeCommand(config: Sources['config'], account: string): string {
  return config.accounts.length > 1 || account !== 'default' ? `vqb resume --account ${account}` : 'vqb resume';
}

/**
 * The keys of the batch (its own, and its pool's) that stopped with paid plates of it. An
 * operator's pause is theirs to lift and is not a stop: the run waits for it, as before.
 */
export async function strandedKeys(services: Sources, info: BatchInfo): Promise<StrandedKey[]> {
  if (info.finishedAt !== undefined || info.counts.inflight === 0) return [];
  // Keys no longer in the settings are history: nothing of theirs is read.
  const configured = new Set(services.config.accounts.map((a) => a.id));
  const keys = [...new Set([info.account, ...(info.pool?.keys ?? [])])].filter((k) => configured.has(k));
  const found = await Promise.all(
    keys.map(async (account): Promise<StrandedKey | undefined> => {
      const plates = await services.inflight.forBatch(account, info.id);
      if (plates === 0) return undefined;
      const state = await services.accounts.line(account).state();
      if (state.pause !== undefined && state.pause.code !== OPERATOR_PAUSE) {
        const { code, message } = state.pause;
        return {
          account,
          plates,
          code,
          message,
          resume: `fix the key, then \`${resumeCommand(services.config, account)}\``,
        };
      }
      if (state.unreachable !== undefined && state.unreachable.attempts >= services.config.attempts)
        return {
          account,
          plates,
          code: 'UPSTREAM_UNREACHABLE',
          message:
            `the upstream has not answered ${state.unreachable.attempts} requests in a row ` +
            `(${state.unreachable.reason})`,
          resume: 'they are read when the upstream answers again',
        };
      return undefined;
    }),
  );
  return found.filter((k): k is StrandedKey => k !== undefined);
}

/**
 * Whether nothing else of the batch can move: every plate not finished was paid on a stopped key
 * (none waits to be created, none is read by a key that serves).
 */
export function onlyStrandedLeft(info: BatchInfo, stranded: readonly StrandedKey[]): boolean {
  const waiting = stranded.reduce((a, k) => a + k.plates, 0);
  return waiting > 0 && info.counts.queued === 0 && waiting >= info.counts.inflight;
}

/** One line a stopped key: how many plates wait for it, why, and what to do. */
export function strandedText(stranded: readonly StrandedKey[]): string[] {
  return stranded.map(
    (k) =>
      `${counted(k.plates, 'plate')} paid with account ${k.account}'s key wait for it (only that key can read ` +
      `them; nothing is paid again): ${k.code}: ${k.message}; ${k.resume}`,
  );
}
