// What the chaos suite submits: two accounts, each with its own key and rate, and normal and bulk
// batches split across them (two normal batches of different weights on one account), plus small
// interactive batches submitted while the faults run. Plates never repeat across batches, so the
// simulator's creates per plate can be checked against one batch's outcome.
import { randomBytes } from 'node:crypto';
import type { PriorityClass } from '../../src/queue/types.js';
import { makePlates } from '../helpers/engine.js';
import { uniform } from './rng.js';

export interface ChaosAccount {
  id: string;
  /** vqb's configured rate and the simulator key's own limit (sliding window) alike. */
  rate: string;
  /** The key the account starts with, and the one it is rotated to if the schedule rotates it. */
  keys: readonly [string, string];
}

export interface PlannedBatch {
  id: string;
  account: string;
  priority: PriorityClass;
  weight: number;
  /** Input rows as a user would send them: valid plates, repeats in other spellings, non-plates. */
  inputs: string[];
  /** The distinct valid plates among the inputs. */
  valid: string[];
}

/** Share of the plates each normal/bulk batch gets: 60 % on the first account, 40 % on the second. */
const LAYOUT: { account: 0 | 1; priority: PriorityClass; weight: number; share: number }[] = [
  { account: 0, priority: 'normal', weight: 2, share: 0.27 },
  { account: 0, priority: 'normal', weight: 1, share: 0.16 },
  { account: 0, priority: 'bulk', weight: 1, share: 0.17 },
  { account: 1, priority: 'normal', weight: 1, share: 0.23 },
  { account: 1, priority: 'bulk', weight: 1, share: 0.17 },
];

function canaryKey(): string {
  return `sk-live-SECRET-canary-${randomBytes(8).toString('hex')}`;
}

export function chaosAccounts(rates: readonly [string, string]): ChaosAccount[] {
  return [
    { id: 'frota', rate: rates[0], keys: [canaryKey(), canaryKey()] },
    { id: 'seguros', rate: rates[1], keys: [canaryKey(), canaryKey()] },
  ];
}

/** The input rows of a batch of these plates: a lower-case dashed repeat every 50, a non-plate or a 6-character fragment every 60. */
function inputsFor(valid: readonly string[]): string[] {
  const inputs: string[] = [];
  valid.forEach((plate, i) => {
    inputs.push(plate);
    if (i % 50 === 7) inputs.push(`${plate.slice(0, 3).toLowerCase()}-${plate.slice(3)}`);
    if (i % 60 === 11) inputs.push(i % 120 === 11 ? 'NOPE' : `${plate.slice(0, 6)}`);
  });
  return inputs;
}

/** The normal and bulk batches, `plates` distinct valid plates in all. */
export function bulkBatches(seed: number, accounts: readonly ChaosAccount[], plates: number): PlannedBatch[] {
  const out: PlannedBatch[] = [];
  let offset = 40_000;
  LAYOUT.forEach((spec, i) => {
    const n = i === LAYOUT.length - 1 ? plates - (offset - 40_000) : Math.round(plates * spec.share);
    const valid = makePlates(n, offset);
    offset += n;
    const account = accounts[spec.account]!.id;
    out.push({
      id: `chaos-${seed}-${account}-${spec.priority}${i}`,
      account,
      priority: spec.priority,
      weight: spec.weight,
      inputs: inputsFor(valid),
      valid,
    });
  });
  return out;
}

/** The n-th interactive batch: 1 to 5 plates, on the accounts in turn. */
export function interactiveBatch(
  seed: number,
  n: number,
  rng: () => number,
  accounts: readonly ChaosAccount[],
): PlannedBatch {
  const valid = makePlates(Math.floor(uniform(rng, 1, 6)), 90_000 + n * 10);
  return {
    id: `chaos-${seed}-i${n}`,
    account: accounts[n % accounts.length]!.id,
    priority: 'interactive',
    weight: 1,
    inputs: [...valid],
    valid,
  };
}
