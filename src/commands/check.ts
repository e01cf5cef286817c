// `vqb check`: each account's key tried without a charge. A GET of a query id nobody made costs no
// query (the price is per query created; it counts once against the rate limit): a working key
// that may view queries is answered 404, a key that cannot work says why (401 / 403), and an
// upstream that does not answer says that. Nothing is created; Redis is not needed.
// `--create PLATE` (./check-create.ts) is the one paid check: one create, followed to its end.

import { type Account, accountKey, accountOf } from '../accounts/account.js';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import { isVqbError, UsageError } from '../errors.js';
import { saneTime } from '../upstream/bounds.js';
import { PERMISSION_FOR } from '../upstream/errors.js';
import { announcedLimit, readAnswer, UpstreamProbe } from '../upstream/probe.js';
import type { RateLimitHeaders } from '../upstream/timing.js';
import type { Command } from './command.js';
import { EXIT_BLOCKED } from './exit.js';

/** What a key check found, one word each (the `verdict` of `--json`). */
export type KeyVerdict =
  | 'ok'
  | 'rate-limited'
  | 'invalid-key'
  | 'expired-key'
  | 'no-view-permission'
  | 'unreachable'
  | 'unexpected'
  | 'not-configured';

export interface KeyCheck {
  account: string;
  baseUrl: string | null;
  verdict: KeyVerdict;
  /** The code behind the verdict: the upstream's (QUERY_NOT_FOUND, EXPIRED_API_KEY, …) or the network's. */
  code: string | null;
  status: number;
  message: string;
  roundTripMs: number | null;
  limit: { limit?: number; remaining?: number; resetAt?: string } | null;
}

/**
 * Exit codes (docs/cli.md): 0 every key works; 3 a key cannot work (refused, expired, missing the
 * view permission), as `vqb run` exits when an account cannot go on; 1 an upstream could not be
 * reached or answered something else; 2 an account is not configured (the settings' exit code).
 */
export function exitCodeOf(checks: readonly KeyCheck[]): number {
  const verdicts = new Set(checks.map((c) => c.verdict));
  if (['invalid-key', 'expired-key', 'no-view-permission'].some((v) => verdicts.has(v as KeyVerdict)))
    return EXIT_BLOCKED;
  if (verdicts.has('not-configured')) return 2;
  if (verdicts.has('unreachable') || verdicts.has('unexpected')) return 1;
  return 0;
}

function limitOf(limit: RateLimitHeaders): KeyCheck['limit'] {
  if (limit.limit === undefined && limit.remaining === undefined && limit.resetAt === undefined) return null;
  return {
    ...(limit.limit !== undefined ? { limit: limit.limit } : {}),
    ...(limit.remaining !== undefined ? { remaining: limit.remaining } : {}),
    // The headers are parsed sane (upstream/timing.ts); a reset that is still no date is left out.
    ...(limit.resetAt !== undefined && saneTime(limit.resetAt) !== undefined
      ? { resetAt: new Date(limit.resetAt).toISOString() }
      : {}),
  };
}

export async function checkAccount(config: Config, account: Account): Promise<KeyCheck> {
  let upstream: { baseUrl: string; key: string };
  try {
    upstream = await accountKey(account);
  } catch (err) {
    if (!isVqbError(err)) throw err;
    const base = { account: account.id, baseUrl: account.baseUrl ?? null, status: 0, roundTripMs: null, limit: null };
    return { ...base, verdict: 'not-configured', code: err.code, message: err.message };
  }
  const probe = new UpstreamProbe({
    baseUrl: upstream.baseUrl,
    key: upstream.key,
    timeoutMs: config.upstreamHttp.requestTimeoutMs,
  });
  try {
    const answer = await probe.unknownQuery();
    const reading = readAnswer(answer, 'get');
    const upstreamCode = reading.ok ? null : reading.code;
    const check = {
      account: account.id,
      baseUrl: upstream.baseUrl,
      status: answer.status,
      roundTripMs: answer.roundTripMs,
      limit: limitOf(announcedLimit(answer, clock.now())),
    };
    if (answer.status === 404 || reading.ok) {
      const said = answer.status === 404 ? `404 ${codeIn(answer.text) ?? ''}`.trim() : String(answer.status);
      return {
        ...check,
        verdict: 'ok',
        code: codeIn(answer.text) ?? null,
        message: `the key works and may view queries (a query id nobody made was answered ${said})`,
      };
    }
    const verdict = verdictOf(reading.kind, reading.code);
    return { ...check, verdict, code: upstreamCode, message: adviceFor(verdict, reading.message) };
  } finally {
    await probe.close();
  }
}

function verdictOf(kind: string, code: string): KeyVerdict {
  if (kind === 'invalid-key') return 'invalid-key';
  if (kind === 'expired-key') return 'expired-key';
  if (kind === 'permission') return 'no-view-permission';
  if (kind === 'rate-limited') return 'rate-limited';
  if (kind === 'transient' && !code.startsWith('HTTP_')) return 'unreachable';
  return 'unexpected';
}

function adviceFor(verdict: KeyVerdict, upstream: string): string {
  switch (verdict) {
    case 'invalid-key':
      return (
        `the upstream does not know this key (401 INVALID_API_KEY: ${upstream}); check the key ` +
        `file, or ask the provider for a new key`
      );
    case 'expired-key':
      return `the key has expired (401 EXPIRED_API_KEY: ${upstream}); put a new key in the key file`;
    case 'no-view-permission':
      return (
        `the key lacks the permission "${PERMISSION_FOR.get}" (403 INSUFFICIENT_PERMISSIONS): ` +
        `vqb could create (and pay for) queries but never read their results; give the key that permission`
      );
    case 'rate-limited':
      return `the key is known but asked to wait (429: ${upstream}); it works once the wait is over`;
    case 'unreachable':
      return `the upstream did not answer (${upstream}); check VQ_BASE_URL, DNS, a proxy or firewall`;
    default:
      return `the upstream answered something vqb did not expect: ${upstream}`;
  }
}

/** The `error.code` of the contract's error body, when there is one. */
function codeIn(text: string): string | undefined {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}

const WORDS: Record<KeyVerdict, string> = {
  ok: 'OK',
  'rate-limited': 'OK (waiting)',
  'invalid-key': 'INVALID KEY',
  'expired-key': 'EXPIRED KEY',
  'no-view-permission': 'NO VIEW PERMISSION',
  unreachable: 'UNREACHABLE',
  unexpected: 'UNEXPECTED ANSWER',
  'not-configured': 'NOT CONFIGURED',
};

/** One line per account: what, why, the limit the answer announced, the round trip. */
export function describeCheck(check: KeyCheck, now: number): string {
  const parts = [`account ${check.account}: ${WORDS[check.verdict]}: ${check.message}`];
  const limit = check.limit;
  if (limit) {
    const reset = limit.resetAt
      ? `, resets in ${Math.max(0, Math.ceil((Date.parse(limit.resetAt) - now) / 1000))} s`
      : '';
    parts.push(`limit ${limit.limit ?? '?'} (${limit.remaining ?? '?'} left${reset})`);
  } else if (check.roundTripMs !== null && check.verdict !== 'unreachable') parts.push('no rate-limit headers');
  if (check.roundTripMs !== null) parts.push(`${check.roundTripMs} ms`);
  return parts.join('; ');
}

export const checkCommand: Command = {
  usage: `vqb check [--account A] [--json]
vqb check --create PLATE [--account A] [--yes]
  Without --create: a GET of a made-up query id per account (nothing is created, no query is
  charged; it counts once against the rate limit). One line per account: the key works, or why
  not (invalid, expired, lacks the permission to view queries, upstream unreachable), the limit
  the answer announced and the round trip.
  Exit codes: 0 every key works; 3 a key cannot work; 1 an upstream unreachable or answering
  something else; 2 an account is not configured.
  --create PLATE  one real create (it costs one query: asked first unless --yes), followed to its
                  end; prints every raw answer beside how vqb read it, and the mapping settings
                  that would read it when vqb cannot.`,
  options: {
    account: { type: 'string' },
    json: { type: 'boolean' },
    create: { type: 'string' },
    yes: { type: 'boolean' },
  },
  async run(ctx) {
    const config = ctx.config();
    const named = typeof ctx.flags.account === 'string' ? ctx.flags.account : undefined;
    if (typeof ctx.flags.create === 'string') {
      // The paid check needs the queue's stores (Redis, BullMQ): loaded only when asked for, so a
      // plain \`vqb check\` stays small (under 100 MB whatever the upstream sends: security.md).
      const { checkCreate } = await import('./check-create.js');
      return checkCreate(ctx, config, accountOf(config, named), ctx.flags.create);
    }
    if (ctx.flags.yes) throw new UsageError('--yes only confirms --create PLATE');
    const accounts = named === undefined ? config.accounts : [accountOf(config, named)];
    const checks = await Promise.all(accounts.map((account) => checkAccount(config, account)));
    const exitCode = exitCodeOf(checks);
    if (ctx.flags.json) ctx.print(JSON.stringify({ accounts: checks, exitCode }));
    else for (const check of checks) ctx.print(describeCheck(check, clock.now()));
    return exitCode;
  },
};
