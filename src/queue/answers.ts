// What an account's upstream answers look like, as far as vqb has understood them (first contact),
// and the answer it could not read when it held the account for it. Kept in Redis per account so
// a restart or another process does not meet the upstream again as a stranger: until one plate
// has been understood end to end (a create answered with a readable id, polls ending in a known
// state), the account sends one create at a time (workers/flow.ts). This module alone reads and
// writes the account's answers hash:
//   shape, at   the field paths of the first answer understood end to end, and when
//   strikes     answers with a state in no list since the account last resumed (held at the third)
//   held        the answer that held the account (KeptAnswer JSON): read again when settings change
//   via         `upstream` when the shape was taken from another account of the same upstream
// and, in one global hash, the shape understood for each upstream (`upstreamOf`: base URL, product
// and answer settings), so a thousand accounts of one upstream meet it once, not a thousand times
// (each would otherwise send one create at a time until its own first plate was read end to end).
// An account whose answers differ anyway is still held at its first unreadable answer (no id) or
// its third (a state in no list): the shape is where fields were found, not a guess at new ones.

import { createHash } from 'node:crypto';
import type { Account } from '../accounts/account.js';
import { clock } from '../clock.js';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';
import type { AnswerShape, KeptAnswer } from '../upstream/answers.js';
import { type AnswerReader, readParsed } from '../upstream/response.js';
import type { AccountLine } from './line.js';

/** The pause code of an account held for an answer vqb cannot read. */
export const UNRECOGNISED_ANSWER = 'UNRECOGNISED_ANSWER';

/** The upstream an account's answers come from, as a short digest: its base URL, product and answer settings. */
export function upstreamOf(account: Pick<Account, 'baseUrl' | 'product' | 'answers'>): string {
  const identity = JSON.stringify([account.baseUrl ?? '', account.product, account.answers]);
  return createHash('sha256').update(identity).digest('hex').slice(0, 24);
}

/** How long a process trusts that an account still meets its upstream (AnswerBook.meeting). */
const MEETING_READ_MS = 1_000;

export class AnswerBook {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;
  /** Accounts this process knows met their upstream already (it never starts again). */
  readonly #met = new Set<string>();
  /**
   * Accounts still meeting their upstream, and when that was read: trusted for MEETING_READ_MS, so
   * that the polls, creates and feeds of first contact do not each read it again. This process's
   * own `learn` ends it at once; another process's is heard within that time.
   */
  readonly #meeting = new Map<string, number>();
  /**
   * Counts this process's `learn`s: a "still meeting" read that was sent before one and lands after
   * it is not remembered (it would hide the answer just read for MEETING_READ_MS).
   */
  #learned = 0;

  constructor(redis: RedisClient, keys: VqbKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  /**
   * The shape understood for the account, when one plate of its own, or of another account of
   * the same upstream (`upstream`, from upstreamOf), has been read end to end. An upstream's shape
   * is copied to the account the first time, with `via: upstream`.
   */
  async understood(accountId: string, upstream?: string, now?: number): Promise<AnswerShape | undefined> {
    const own = await this.#redis.hget(this.#keys.answers(accountId), 'shape');
    if (own !== null) return parseShape(own);
    if (upstream === undefined) return undefined;
    const shared = await this.#redis.hget(this.#keys.upstreamAnswers(), upstream);
    if (shared === null) return undefined;
    const key = this.#keys.answers(accountId);
    if ((await this.#redis.hsetnx(key, 'shape', shared)) === 1)
      await this.#redis.hset(key, 'at', String(now ?? clock.now()), 'via', 'upstream');
    return parseShape(shared);
  }

  /**
   * Whether the account still meets its upstream (no plate of its own or of its upstream read end
   * to end yet): asked of Redis until the answer is no, then never again in this process.
   */
  async meeting(account: Pick<Account, 'id' | 'baseUrl' | 'product' | 'answers'>, now = clock.now()): Promise<boolean> {
    if (this.#met.has(account.id)) return false;
    if (now - (this.#meeting.get(account.id) ?? Number.NEGATIVE_INFINITY) < MEETING_READ_MS) return true;
    const learned = this.#learned;
    if ((await this.understood(account.id, upstreamOf(account), now)) === undefined) {
      if (learned === this.#learned) this.#meeting.set(account.id, now);
      return true;
    }
    this.#meeting.delete(account.id);
    this.#met.add(account.id);
    return false;
  }

  /**
   * One plate was understood end to end: first contact is over for every process, and for every
   * account of the same upstream when `upstream` is given. True when this call said so first for
   * the account.
   */
  async learn(accountId: string, shape: AnswerShape, now: number, upstream?: string): Promise<boolean> {
    const key = this.#keys.answers(accountId);
    const text = JSON.stringify(shape);
    // What one account understood may end first contact for every account of its upstream.
    this.#learned++;
    if (upstream !== undefined) this.#meeting.clear();
    else this.#meeting.delete(accountId);
    const first = (await this.#redis.hsetnx(key, 'shape', text)) === 1;
    if (first) await this.#redis.hset(key, 'at', String(now));
    if (upstream !== undefined) await this.#redis.hsetnx(this.#keys.upstreamAnswers(), upstream, text);
    return first;
  }

  /** One more answer with a state in no list; returns how many since the account last resumed. */
  async strike(accountId: string): Promise<number> {
    return this.#redis.hincrby(this.#keys.answers(accountId), 'strikes', 1);
  }

  /** Keeps the answer that held the account, to read it again when the settings change. */
  async hold(accountId: string, kept: KeptAnswer): Promise<void> {
    await this.#redis.hset(this.#keys.answers(accountId), 'held', JSON.stringify(kept));
  }

  async held(accountId: string): Promise<KeptAnswer | undefined> {
    const text = await this.#redis.hget(this.#keys.answers(accountId), 'held');
    if (text === null) return undefined;
    try {
      return JSON.parse(text) as KeptAnswer;
    } catch {
      return undefined;
    }
  }

  /** The account resumed: its strikes start again, the held answer is let go. */
  async reopen(accountId: string): Promise<void> {
    await this.#redis.hdel(this.#keys.answers(accountId), 'strikes', 'held');
  }

  /**
   * An account held for an answer: does the answer it kept read with `reader` (the settings of
   * this process)? `not-held`: the account is not held for an answer.
   */
  async verdict(line: AccountLine, reader: AnswerReader): Promise<'reads' | 'unreadable' | 'not-held'> {
    const state = await line.state();
    if (state.pause?.code !== UNRECOGNISED_ANSWER) return 'not-held';
    const kept = await this.held(line.account.id);
    if (kept === undefined) return 'reads';
    try {
      readParsed(kept.operation, kept.status, kept.answer, kept.operation === 'get' ? 'kept' : undefined, reader);
      return 'reads';
    } catch {
      return 'unreadable';
    }
  }
}

function parseShape(text: string): AnswerShape {
  try {
    return JSON.parse(text) as AnswerShape;
  } catch {
    return {};
  }
}
