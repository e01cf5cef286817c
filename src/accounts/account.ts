// Accounts: one upstream key each, with its own limits. A customer may hold several keys (a fleet
// team's plan and an insurer's, say); each runs at its own rate, holds for its own 429s and quota,
// and pauses alone when its key fails. Read once with the rest of the config: from
// VQ_ACCOUNTS_FILE (JSON), or, without it, the environment's settings form the one account
// `default`, exactly as before accounts existed. Which account a batch or command names is decided
// here alone (accountOf), and what a worker needs of it to call the upstream (requireAccountUpstream).

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError, PoolError, VqbError } from '../errors.js';

import { isCurrency, type Price, priceMicros } from '../money.js';
import { ACCOUNT_ID } from '../redis/keys.js';
import type { ApiKeySource, RateLimit, TokenSource } from '../setting-values.js';
import { parseRateLimit, Secret } from '../setting-values.js';
import { type AnswerMapping, isPointer, NO_MAPPING } from '../upstream/answers.js';
import { createKeyProvider } from '../upstream/key.js';

export interface Account {
  /** Lower-case letters, digits, `_` and `-`; it names the account's queue and Redis keys. */
  id: string;
  apiKey: ApiKeySource | undefined;
  baseUrl: string | undefined;
  product: string;
  rateLimit: RateLimit;
  perDay: number | undefined;
  perMonth: number | undefined;
  /**
   * What the upstream charges this account (VQ_PRICE_PER_QUERY, or the file's pricePerQuery);
   * undefined = no price set.
   */
  price: Price | undefined;
  /** Service tokens scoped to this account (they see and submit only its batches). */
  tokens: TokenSource | undefined;
  /**
   * Results this account paid for may answer other sharing accounts' plates, and theirs its own
   * (`"shareResults": true`). Off by default: reuse stays within the account.
   */
  shareResults?: boolean;
  /** How the upstream's answers are read beyond what is plainly there (VQ_ANSWER_*, VQ_STATES_*). */
  answers: AnswerMapping;
  /**
   * The pool of keys the account belongs to (`"pool": "NAME"`): a pooled batch is served by all of
   * them (docs/plans.md).
   */
  pool?: string;
}

const accountSchema = z.strictObject({
  id: z.string().regex(ACCOUNT_ID, 'lower-case letters, digits, _ and -, at most 32'),
  apiKeyFile: z.string().min(1).optional(),
  apiKey: z.string().min(1).optional(),
  baseUrl: z.url({ protocol: /^https?$/ }).optional(),
  product: z
    .string()
    .regex(/^[a-z0-9-]+$/)
    .optional(),
  rateLimit: z
    .string()
    .refine((v) => parseRateLimit(v) !== undefined, 'auto, auto<=300/min, or a rate such as 60/min or 5/s')
    .optional(),
  maxCreatesPerDay: z.number().int().min(0).optional(),
  maxCreatesPerMonth: z.number().int().min(0).optional(),
  pricePerQuery: z.union([z.number().min(0), z.string().min(1)]).optional(),
  pricePerPoll: z.union([z.number().min(0), z.string().min(1)]).optional(),
  currency: z
    .string()
    .regex(/^[A-Za-z]{3}$/, 'an ISO 4217 code such as BRL')
    .optional(),
  tokens: z.array(z.string().min(16, 'tokens of at least 16 characters')).optional(),
  tokensFile: z.string().min(1).optional(),
  shareResults: z.boolean().optional(),
  answerId: z.string().refine(isPointer, 'a JSON Pointer such as /data/ticket').optional(),
  answerStatus: z.string().refine(isPointer, 'a JSON Pointer such as /data/situacao').optional(),
  answerResult: z.string().refine(isPointer, 'a JSON Pointer such as /data/veiculo').optional(),
  statesPending: z.union([z.string(), z.array(z.string())]).optional(),
  statesDone: z.union([z.string(), z.array(z.string())]).optional(),
  statesFailed: z.union([z.string(), z.array(z.string())]).optional(),
  pool: z.string().regex(ACCOUNT_ID, 'a pool name: lower-case letters, digits, _ and -, at most 32').optional(),
});

const fileSchema = z.strictObject({ accounts: z.array(accountSchema).min(1) });

export interface AccountDefaults {
  baseUrl: string | undefined;
  product: string;
  rateLimit: RateLimit;
  /** VQ_PRICE_PER_QUERY / VQ_PRICE_PER_POLL / VQ_CURRENCY, for accounts that set no price of their own. */
  price?: Price | undefined;
  /** The environment's mapping: an account's own fields replace its pointers and add to its states. */
  answers?: AnswerMapping;
}

/** A comma list (or a JSON list) of states, trimmed, empty ones dropped. */
export function stateList(value: string | readonly string[] | undefined): string[] {
  const items = typeof value === 'string' ? value.split(',') : (value ?? []);
  return items.map((s) => s.trim()).filter((s) => s !== '');
}

/** An account's mapping: its own pointers over the environment's, its states added to them. */
function accountAnswers(a: z.infer<typeof accountSchema>, base: AnswerMapping): AnswerMapping {
  const id = a.answerId ?? base.id;
  const status = a.answerStatus ?? base.status;
  const result = a.answerResult ?? base.result;
  return {
    ...(id !== undefined ? { id } : {}),
    ...(status !== undefined ? { status } : {}),
    ...(result !== undefined ? { result } : {}),
    pending: [...base.pending, ...stateList(a.statesPending)],
    done: [...base.done, ...stateList(a.statesDone)],
    failed: [...base.failed, ...stateList(a.statesFailed)],
  };
}

export function defaultAccount(
  settings: AccountDefaults & {
    apiKey: ApiKeySource | undefined;
    perDay: number | undefined;
    perMonth: number | undefined;
  },
): Account {
  const { answers, ...rest } = settings;
  return { id: 'default', tokens: undefined, answers: answers ?? NO_MAPPING, ...rest, price: settings.price };
}

/** An account's own price, over the environment's (any of the three fields may be given alone). */
function accountPrice(
  a: {
    id: string;
    pricePerQuery?: number | string | undefined;
    pricePerPoll?: number | string | undefined;
    currency?: string | undefined;
  },
  fallback: Price | undefined,
  source: string,
): Price | undefined {
  const micros = (field: string, value: number | string | undefined) =>
    value === undefined ? undefined : priceMicros(`${source} (account ${a.id}, ${field})`, String(value));
  const perQueryMicros = micros('pricePerQuery', a.pricePerQuery) ?? fallback?.perQueryMicros;
  if (perQueryMicros === undefined) return undefined;
  const currency = a.currency?.toUpperCase() ?? fallback?.currency ?? 'BRL';
  if (!isCurrency(currency))
    throw new ConfigError(source, `account ${a.id}: currency ${currency} is not an ISO 4217 code`);
  return {
    perQueryMicros,
    perPollMicros: micros('pricePerPoll', a.pricePerPoll) ?? fallback?.perPollMicros ?? 0,
    currency,
  };
}

/** Parses the accounts file's text; every problem is a ConfigError naming the account and field. */
export function parseAccounts(text: string, defaults: AccountDefaults, source = 'VQ_ACCOUNTS_FILE'): Account[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(
      source,
      `expected JSON such as {"accounts": [{"id": "frota", "apiKeyFile": "…", "rateLimit": ` +
        `"300/min"}]}; ${(err as Error).message}`,
    );
  }
  const result = fileSchema.safeParse(json);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new ConfigError(source, `${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`);
  }
  const seen = new Set<string>();
  const accounts = result.data.accounts.map((a) => {
    if (seen.has(a.id)) throw new ConfigError(source, `account ${a.id} is listed twice`);
    seen.add(a.id);
    if (a.apiKey && a.apiKeyFile) throw new ConfigError(source, `account ${a.id}: set apiKey or apiKeyFile, not both`);
    if (a.tokens && a.tokensFile) throw new ConfigError(source, `account ${a.id}: set tokens or tokensFile, not both`);
    const apiKey: ApiKeySource | undefined = a.apiKeyFile
      ? { kind: 'file', path: a.apiKeyFile }
      : a.apiKey
        ? { kind: 'inline', secret: new Secret(a.apiKey) }
        : undefined;
    const tokens: TokenSource | undefined = a.tokensFile
      ? { kind: 'file', path: a.tokensFile }
      : a.tokens
        ? { kind: 'inline', secrets: a.tokens.map((t) => new Secret(t)) }
        : undefined;
    return {
      id: a.id,
      apiKey,
      baseUrl: a.baseUrl?.replace(/\/+$/, '') ?? defaults.baseUrl,
      product: a.product ?? defaults.product,
      rateLimit: a.rateLimit ? parseRateLimit(a.rateLimit)! : defaults.rateLimit,
      perDay: a.maxCreatesPerDay,
      perMonth: a.maxCreatesPerMonth,
      price: accountPrice(a, defaults.price, source),
      tokens,
      ...(a.shareResults === true ? { shareResults: true } : {}),
      answers: accountAnswers(a, defaults.answers ?? NO_MAPPING),
      ...(a.pool !== undefined ? { pool: a.pool } : {}),
    };
  });
  checkPools(accounts, source);
  return accounts;
}

/** Who may see an account's batches: its service tokens (a file by its path, inline ones by their value). */
function ownerOf(account: Account): string {
  const t = account.tokens;
  if (t === undefined) return 'every token';
  if (t.kind === 'file') return `tokensFile ${t.path}`;
  return `tokens ${t.secrets
    .map((s) => s.reveal())
    .sort()
    .join(',')}`;
}

/**
 * The keys of one pool serve the same batches, so they must be one product (a plate created on
 * another product is another query) and one owner (a pooled batch is seen through each key's
 * tokens: a key of another team would show it to that team). A pool's name must not be an
 * account's id either: `--pool x` and `--account x` would name two things.
 */
function checkPools(accounts: readonly Account[], source: string): void {
  const byPool = new Map<string, Account[]>();
  for (const a of accounts) if (a.pool !== undefined) byPool.set(a.pool, [...(byPool.get(a.pool) ?? []), a]);
  for (const [pool, members] of byPool) {
    const [first, ...rest] = members as [Account, ...Account[]];
    if (accounts.some((a) => a.id === pool))
      throw new PoolError(pool, source, 'a pool may not be named like an account (--pool and --account would clash)');
    for (const m of rest) {
      if (m.product !== first.product)
        throw new PoolError(
          pool,
          source,
          `accounts ${first.id} (product ${first.product}) and ${m.id} (product ${m.product}) are not one product`,
        );
      if (ownerOf(m) !== ownerOf(first))
        throw new PoolError(
          pool,
          source,
          `accounts ${first.id} and ${m.id} have other owners (their tokens differ): a pool's keys share one owner`,
        );
    }
  }
}

/**
 * The pool a batch names: its home (the account named, which must be one of its keys, else the
 * first listed) and its other keys. An unknown pool, or an account outside it, is POOL_NOT_FOUND,
 * before anything is stored or sent.
 */
/** A pool as a batch uses it: its name, the key the batch lives with, and the pool's other keys. */
export interface PoolChoice {
  name: string;
  home: string;
  keys: string[];
}

export function poolFor(config: { readonly accounts: readonly Account[] }, name: string, account?: string): PoolChoice {
  const members = poolMembers(config, name).map((a) => a.id);
  if (account !== undefined && !members.includes(account))
    throw new VqbError(
      'POOL_NOT_FOUND',
      `account ${account} is not a key of pool ${name} (its keys: ${members.join(', ')})`,
    );
  const home = account ?? members[0]!;
  return { name, home, keys: members.filter((m) => m !== home) };
}

/** The keys of pool `name`, in the configured order; an unknown pool is POOL_NOT_FOUND listing the known ones. */
export function poolMembers(config: { readonly accounts: readonly Account[] }, name: string): Account[] {
  const members = config.accounts.filter((a) => a.pool === name);
  if (members.length === 0) {
    const known = [...new Set(config.accounts.flatMap((a) => (a.pool !== undefined ? [a.pool] : [])))];
    throw new VqbError(
      'POOL_NOT_FOUND',
      `no pool ${JSON.stringify(name)}; ` +
        `${known.length > 0 ? `declared: ${known.join(', ')}` : 'no pool is declared'} ` +
        '(an account joins one with "pool": "NAME" in VQ_ACCOUNTS_FILE)',
    );
  }
  return members;
}

export function loadAccountsFile(path: string, defaults: AccountDefaults): Account[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new ConfigError('VQ_ACCOUNTS_FILE', `cannot read ${path}`);
  }
  return parseAccounts(text, defaults);
}

/** The rate is learned from the upstream (`auto`), not configured. */
export function isAuto(account: Pick<Account, 'rateLimit'>): boolean {
  return account.rateLimit.auto !== undefined;
}

/** Requests per second the account may make (for `auto`, the rate it starts from; the rate in force is in its line). */
export function perSecond(account: Pick<Account, 'rateLimit'>): number {
  return (account.rateLimit.max * 1_000) / account.rateLimit.durationMs;
}

/** The jitter allowance is at least this share of the limit's window (see jitterAllowanceMs). */
export const JITTER_PER_WINDOW = 0.005;

/**
 * How late a request may leave and still keep its slot, twice over (the pacing waits for half of
 * it): VQ_PACING_JITTER, or 0.5 % of a longer window. A request that leaves later gives its slot
 * up for the next one, which on a per-minute limit is seconds away (12/min: 5 s); 25 ms is a
 * blink for a busy event loop among a thousand accounts (issue 21: a quarter of the accounts
 * used less than 0.9 of their limit), while 300 ms of a minute costs the rate 0.5 %.
 */
export function jitterAllowanceMs(windowMs: number, jitterMs: number): number {
  return Math.max(jitterMs, windowMs * JITTER_PER_WINDOW);
}

/**
 * The pacing interval: N requests spaced this far apart span the window plus the jitter
 * allowance, so a sliding window of any alignment never counts N+1 even when one request is
 * delayed by up to the allowance on its way. At 60/min this costs 0.5 % of the rate; at 20/s with
 * 25 ms, 2.4 %.
 */
export function pacingIntervalMs(account: Pick<Account, 'rateLimit'>, jitterMs: number): number {
  const windowMs = account.rateLimit.durationMs;
  return (windowMs + jitterAllowanceMs(windowMs, jitterMs)) / account.rateLimit.max;
}

/** The account a batch or command names; an unknown id is a typed error listing the known ones. */
export function accountOf(config: { readonly accounts: readonly Account[] }, id: string | undefined): Account {
  const wanted = id ?? config.accounts[0]?.id ?? 'default';
  const account = config.accounts.find((a) => a.id === wanted);
  if (!account)
    throw new VqbError(
      'ACCOUNT_NOT_FOUND',
      `no account ${JSON.stringify(wanted)}; configured: ${config.accounts.map((a) => a.id).join(', ')}`,
    );
  return account;
}

/** Workers call the upstream for every account: each needs a base URL and a key. */
export function requireAccountUpstream(account: Account): { baseUrl: string; apiKey: ApiKeySource } {
  const fromEnv = account.id === 'default';
  if (!account.baseUrl) {
    if (fromEnv)
      throw new ConfigError(
        'VQ_BASE_URL',
        'expected the upstream base URL, e.g. https://api.example.com; it is not set',
      );
    throw new ConfigError(
      'VQ_ACCOUNTS_FILE',
      `expected the upstream base URL of account ${account.id} (baseUrl, or VQ_BASE_URL); it is not set`,
    );
  }
  if (!account.apiKey) {
    if (fromEnv)
      throw new ConfigError(
        'VQ_API_KEY',
        'expected the upstream API key (or VQ_API_KEY_FILE naming a file that holds it); neither is set',
      );
    throw new ConfigError(
      'VQ_ACCOUNTS_FILE',
      `expected the upstream API key of account ${account.id} (apiKeyFile or apiKey); neither is set`,
    );
  }
  return { baseUrl: account.baseUrl, apiKey: account.apiKey };
}

/** The base URL and key of `account`, the key read now; a ConfigError when it has none. */
export async function accountKey(account: Account): Promise<{ baseUrl: string; key: string }> {
  const { baseUrl, apiKey } = requireAccountUpstream(account);
  return { baseUrl, key: await createKeyProvider(apiKey)() };
}
