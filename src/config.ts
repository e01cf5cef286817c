// Every setting is read here, once, from the environment plus CLI overrides, validated with zod,
// and handed down as a frozen Config. Nothing else in the code base reads process.env.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { type Account, defaultAccount, loadAccountsFile, stateList } from './accounts/account.js';
import { ConfigError, PoolError } from './errors.js';
import { isCurrency, type Price, parseAmountMicros, priceMicros } from './money.js';
import { parseRedisConnection, type RedisConnection } from './redis/settings.js';
import { type AnswerMapping, isPointer } from './upstream/answers.js';
import { forbiddenHost, hostAllowed, type WebhookSettings } from './webhooks/target.js';

export type { Account } from './accounts/account.js';

import type { ApiKeySource, RateLimit, TokenSource } from './setting-values.js';
import { parseDuration, parseRateLimit, Secret } from './setting-values.js';
import { isTimeZone, localZone } from './time-text.js';
import { type Lang, langOf, processLang } from './words.js';

const bool = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no', 'on', 'off'])
  .transform((v) => ['1', 'true', 'yes', 'on'].includes(v));
const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
const duration = z.string().transform((v, ctx) => {
  const ms = parseDuration(v);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: 'a duration such as 500ms, 30s, 5m or 24h' });
    return z.NEVER;
  }
  return ms;
});

const pointer = z.string().refine(isPointer, 'a JSON Pointer such as /data/ticket (RFC 6901: starts with /)');

/** Each variable, its meaning and default. The README's configuration table is this list. */
export const SETTINGS = {
  VQ_BASE_URL: {
    schema: z.url({ protocol: /^https?$/ }).optional(),
    help: 'upstream base URL (https://…); required by commands that call the upstream',
  },
  VQ_API_KEY: { schema: z.string().min(1).optional(), help: 'upstream API key (sent as x-api-key)' },
  VQ_API_KEY_FILE: {
    schema: z.string().min(1).optional(),
    help: 'file holding the key instead of VQ_API_KEY; re-read when it changes (key rotation without restart)',
  },
  VQ_PRODUCT: {
    schema: z
      .string()
      .regex(/^[a-z0-9-]+$/)
      .default('agregados'),
    help: 'upstream product slug used for creates',
  },
  REDIS_URL: {
    schema: z
      .string()
      .regex(/^rediss?:\/\//, 'a redis:// or rediss:// URL')
      .default('redis://127.0.0.1:6379'),
    help:
      'Redis connection URL (redis://[user:password@]host:port[/db], rediss:// for TLS); in ' +
      'cluster mode one or more seed nodes, comma-separated',
  },
  VQ_REDIS_MODE: {
    schema: z.enum(['standalone', 'cluster', 'sentinel']).default('standalone'),
    help:
      'standalone (one Redis), cluster (Redis Cluster: REDIS_URL lists seed nodes) or sentinel ' +
      '(REDIS_SENTINELS and REDIS_SENTINEL_NAME find the primary)',
  },
  REDIS_PASSWORD_FILE: {
    schema: z.string().min(1).optional(),
    help: 'file holding the Redis password, instead of a password in REDIS_URL',
  },
  REDIS_TLS_CA_FILE: {
    schema: z.string().min(1).optional(),
    help: 'PEM file of the CA that signed the Redis server certificates (rediss://); read once at start-up',
  },
  REDIS_SENTINELS: {
    schema: z.string().min(1).optional(),
    help: 'sentinel mode: the sentinels, host:port comma-separated',
  },
  REDIS_SENTINEL_NAME: {
    schema: z.string().min(1).optional(),
    help: 'sentinel mode: the name the sentinels monitor the primary under',
  },
  REDIS_SENTINEL_PASSWORD_FILE: {
    schema: z.string().min(1).optional(),
    help: 'sentinel mode: file holding the password of the sentinels themselves (requirepass of the sentinels)',
  },
  VQ_REDIS_REPLICA_ACKS: {
    schema: int(0, 16).optional(),
    help:
      'replicas that must acknowledge each paid write (an outcome, a query id) before vqb takes it as ' +
      'stored (Redis WAIT): default 1 in sentinel mode, 0 otherwise; 0 in a Sentinel deployment ' +
      'with no replica (a failover could then lose such writes)',
  },
  VQ_ALLOW_EVICTION: {
    schema: bool.default(false),
    help: 'start even if Redis may evict keys (maxmemory-policy other than noeviction): evicted keys are lost results',
  },
  VQ_QUEUE: {
    schema: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, _ and -')
      .default('vqb'),
    help: 'BullMQ queue name',
  },
  VQ_PREFIX: {
    schema: z
      .string()
      .regex(/^[^:\s]+$/, 'no spaces or colons')
      .default('{vqb}'),
    help: 'Redis key prefix; keep the {hash tag} for Redis Cluster',
  },
  VQ_RATE_LIMIT: {
    schema: z.string().default('auto'),
    help:
      'upstream request limit shared by all workers: `auto` learns it from the upstream (its ' +
      'rate-limit headers, else its 429s), `auto<=300/min` never above; a number (60/min, 5/s) is used exactly',
  },
  VQ_ANSWER_ID: {
    schema: pointer.optional(),
    help:
      "JSON Pointer (RFC 6901) to the query id in the upstream's answer body, e.g. " +
      '/data/ticket, when vqb does not find it by itself (queryId, id, query_id, uuid, protocolo…, ' +
      'bare or in body/data/result/payload)',
  },
  VQ_ANSWER_STATUS: {
    schema: pointer.optional(),
    help:
      "JSON Pointer to the query's state in the answer body, e.g. /data/situacao (by itself vqb " +
      'reads status, state, situacao, estado…)',
  },
  VQ_ANSWER_RESULT: {
    schema: pointer.optional(),
    help:
      "JSON Pointer to a finished query's result in the answer body (default: the whole object " +
      'holding the id and state)',
  },
  VQ_STATES_PENDING: {
    schema: z.string().optional(),
    help:
      'comma list of states that mean "still running", added to the built-in ones (PROCESSING, ' +
      'PENDING, PROCESSANDO, PENDENTE, EM_ANDAMENTO…); compared without case or accents',
  },
  VQ_STATES_DONE: {
    schema: z.string().optional(),
    help:
      'comma list of states that mean "finished with a result", added to the built-in ones ' +
      '(COMPLETED, SUCCESS, DONE, CONCLUIDA, FINALIZADO, SUCESSO…)',
  },
  VQ_STATES_FAILED: {
    schema: z.string().optional(),
    help:
      'comma list of states that mean "finished without a result", added to the built-in ones ' +
      '(FAILED, ERROR, ERRO, FALHA…)',
  },
  VQ_ACCOUNTS_FILE: {
    schema: z.string().min(1).optional(),
    help:
      'JSON file of accounts (one upstream key each, with its own rate limit and caps); without ' +
      'it the settings above form one account, `default`',
  },
  VQ_PACING_JITTER: {
    schema: duration.default(25),
    help:
      'delay allowance between two requests of one account: N requests span at least the window ' +
      'plus this (or 0.5 % of a longer window), so a sliding window never sees N+1',
  },
  VQ_INTERACTIVE_MAX: {
    schema: int(1, 500).default(100),
    help: 'most plates an `interactive` batch may hold (they are served before anything else of the account)',
  },
  VQ_CONCURRENCY: {
    schema: int(1, 1000).default(8),
    help:
      "jobs each account's Worker runs at once, at least (each makes at most one request): more " +
      "when the account's rate and the upstream's answer time need them",
  },
  VQ_MAX_IN_FLIGHT: {
    schema: int(1).default(500),
    help: 'queries created but not finished, per account, across all workers; new creates of the account wait above it',
  },
  VQ_POLL_INITIAL: {
    // Late costs seconds, early costs a poll (quota): a fresh deployment starts at the slow end of
    // the upstream's answers (the simulator's 5-15 s) and learns down from there (issue 36).
    schema: duration.default(15_000),
    help: 'first poll after a create, before anything is learned',
  },
  VQ_POLL_INTERVAL: {
    schema: duration.default(2_000),
    help: 'wait after a poll that found the query still running (doubles each time)',
  },
  VQ_POLL_MAX_INTERVAL: { schema: duration.default(15_000), help: 'cap on the wait between polls' },
  VQ_POLL_DEADLINE: {
    schema: duration.default(300_000),
    help: 'give up polling a query after this long (POLL_TIMEOUT, queryId kept)',
  },
  VQ_POLL_ADAPTIVE: {
    schema: bool.default(true),
    help: 'learn time-to-complete (shared in Redis) and aim the first poll at it',
  },
  VQ_POLL_QUANTILE: {
    schema: z.coerce.number().min(0.5).max(0.99).default(0.9),
    help: 'adaptive: share of queries that should be finished at the first poll',
  },
  VQ_POLL_INTERACTIVE: {
    schema: duration.default(1_000),
    help:
      'interactive plates are polled this soon after the create and this often after (a person ' +
      'waits; polls cost quota, but such batches are small)',
  },
  VQ_ATTEMPTS: {
    schema: int(1, 100).default(8),
    help:
      'tries for transient failures (5xx, resets, timeouts) before a job fails; ' +
      '`vqb run` stops (exit 3) when this many requests in a row get no answer',
  },
  VQ_BACKOFF: {
    schema: duration.default(1_000),
    help: 'first retry delay after a transient failure (exponential, with jitter)',
  },
  VQ_RECREATE_UNCERTAIN: {
    schema: bool.default(true),
    help: 'a create whose answer was lost in a crash is sent again (flagged "possible duplicate charge")',
  },
  VQ_MAX_CREATES_PER_DAY: {
    schema: int(0).optional(),
    help: 'spending cap: creates per UTC day for the key (unset = none); raise at run time with `vqb budget --per-day`',
  },
  VQ_MAX_CREATES_PER_MONTH: {
    schema: int(0).optional(),
    help: 'spending cap: creates per UTC month for the key (unset = none)',
  },
  VQ_PRICE_PER_QUERY: {
    schema: z.string().min(1).optional(),
    help:
      'what the upstream charges per query created (e.g. 0.35, in VQ_CURRENCY): counts become ' +
      'money in `vqb cost`, the dry run, `vqb status`, the console, the API and metrics, and caps ' +
      'may be given in money (--max-spend); per account: pricePerQuery',
  },
  VQ_PRICE_PER_POLL: {
    schema: z.string().min(1).default('0'),
    help:
      'what the upstream charges per poll (a GET of a query), when it bills reads too; 0 = ' +
      'polls are free (the contract says they spend the same quota, the price is per query created)',
  },
  VQ_CONFIRM_ABOVE: {
    schema: z
      .string()
      .min(1)
      .refine((t) => t === 'off' || parseAmountMicros(t) !== undefined, 'an amount such as 100 or 250.50, or off')
      .default('100'),
    help:
      '`vqb run` on a terminal asks before a new batch that would cost more than this (in the ' +
      "account's currency when it has a price per query, else in creates); --yes skips the question, " +
      'off never asks; without a terminal nothing is asked',
  },
  VQ_TIME_ZONE: {
    schema: z.string().min(1).refine(isTimeZone, 'an IANA time zone such as America/Sao_Paulo').optional(),
    help:
      'the clock a deadline such as `--by 18:00` is read on, and every time the CLI and the console show is ' +
      "on, zone named (IANA, e.g. America/Sao_Paulo); default: the process's own (TZ), which in a container " +
      'is often UTC; JSON keeps ISO 8601',
  },
  VQ_CURRENCY: {
    schema: z
      .string()
      .regex(/^[A-Za-z]{3}$/, 'an ISO 4217 code such as BRL')
      .transform((v) => v.toUpperCase())
      .default('BRL'),
    help: 'currency of the prices (ISO 4217); amounts are shown in pt-BR form (R$ 1.234,50)',
  },
  VQ_REUSE_WITHIN: {
    schema: duration.default(0),
    help:
      'default reuse window: a plate with a stored result this recent is answered from it, free ' +
      '(0 = off; per batch: --reuse-within)',
  },
  VQ_REUSE_KEEP: {
    schema: duration.default(7 * 86_400_000),
    help:
      'how long a done plate stays findable for reuse by later batches ' +
      '(whole with reuse on, else a pointer to its batch; 0 = keep none)',
  },
  VQ_LOCK_DURATION: {
    schema: duration.default(30_000),
    help: 'job lock; a worker that dies is noticed after about this long',
  },
  VQ_STALLED_INTERVAL: { schema: duration.default(30_000), help: 'how often workers look for jobs whose worker died' },
  VQ_MAX_STALLED: {
    schema: int(1, 1000).default(20),
    help: 'times a job may be found stalled (its worker died) before it fails',
  },
  VQ_CONNECT_TIMEOUT: { schema: duration.default(10_000), help: 'upstream TCP/TLS connect timeout' },
  VQ_REQUEST_TIMEOUT: { schema: duration.default(30_000), help: 'upstream headers and body timeout each' },
  VQ_OUT_DIR: { schema: z.string().min(1).default('out'), help: 'where batch exports are written' },
  VQ_CSV_DELIMITER: {
    schema: z.enum([',', ';', 'tab']).default(';'),
    help: 'delimiter of the CSV exports; ; opens in columns in pt-BR Excel',
  },
  VQ_EXPORT_LAYOUT: {
    schema: z.enum(['readable', 'raw']).default('readable'),
    help:
      'readable: the CSV and .xlsx exports for people (the plate and your columns, the vehicle under ' +
      'headers in VQ_LANG, times on VQ_TIME_ZONE, technical columns last); raw: the columns the exports ' +
      'had before, for scripts that read them',
  },
  VQ_LANG: {
    schema: z
      .string()
      .transform((v, ctx) => {
        const lang = langOf(v);
        if (lang === undefined) {
          ctx.addIssue({ code: 'custom', message: 'pt-BR or en' });
          return z.NEVER;
        }
        return lang;
      })
      .optional(),
    help:
      "the language of the exports (headers, rejects, errors) and of a run's report of them: pt-BR or " +
      'en; default: the locale (LC_ALL, LC_MESSAGES, LANG) when it is Portuguese or English, else pt-BR',
  },
  VQ_ROOT: {
    schema: z.string().min(1).default('data'),
    help: 'root of the drop folders (inbox/, processing/, archive/, failed/, outbox/)',
  },
  VQ_HTTP_HOST: {
    schema: z.string().min(1).default('127.0.0.1'),
    help: 'address `vqb serve` listens on (0.0.0.0 in containers)',
  },
  VQ_HTTP_PORT: { schema: int(0, 65535).default(8080), help: 'port of the HTTP API (`vqb serve`)' },
  VQ_API_TOKENS: {
    schema: z.string().min(1).optional(),
    help: 'comma-separated service tokens accepted by the HTTP API (never the upstream key)',
  },
  VQ_API_TOKENS_FILE: {
    schema: z.string().min(1).optional(),
    help: 'file with one service token per line, instead of VQ_API_TOKENS',
  },
  VQ_HTTP_BODY_LIMIT: {
    schema: int(1024).default(10 * 1024 * 1024),
    help: 'largest request body the HTTP API reads, in bytes',
  },
  VQ_HTTP_MAX_PLATES: { schema: int(1).default(100_000), help: 'most plates one HTTP request may enqueue' },
  VQ_API_RATE_LIMIT: {
    schema: int(0).default(1_200),
    help:
      'requests a minute one service token may send to /v1 (shared by every `vqb serve` in ' +
      'Redis; 0: no limit); an address without a valid token gets at most 30',
  },
  VQ_HTTP_REQUEST_TIMEOUT: {
    schema: duration.pipe(z.number().min(100, 'at least 100ms')).default(30_000),
    help:
      'time a client has to send a whole request to the HTTP API, headers and body (408 and the ' +
      'connection closed after)',
  },
  VQ_HTTP_TRUST_PROXY: {
    schema: z.string().min(1).optional(),
    help:
      'comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-Proto/-For `vqb ' +
      'serve` believes (the console cookie is Secure when the proxy says https)',
  },
  VQ_CONSOLE_UPLOADS_MAX: {
    schema: int(1024 * 1024).default(256 * 1024 * 1024),
    help: 'bytes the web console’s unconfirmed uploads, every session’s together, may hold in Redis (429 above)',
  },
  VQ_METRICS_PORT: {
    schema: int(1, 65535).optional(),
    help: '`vqb work` serves Prometheus metrics on this port (off when unset)',
  },
  VQ_INBOX_POLL: { schema: duration.default(1_000), help: 'how often the drop folder is scanned' },
  VQ_INBOX_STABLE: {
    schema: duration.default(2_000),
    help: 'a dropped file is taken once its size has not changed for this long',
  },
  VQ_RETAIN: {
    schema: z
      .string()
      .transform((v, ctx) => {
        if (['off', 'never', 'forever'].includes(v.trim().toLowerCase())) return 0;
        const ms = parseDuration(v);
        if (ms === undefined) {
          ctx.addIssue({ code: 'custom', message: 'a duration such as 30d or 12h, or off' });
          return z.NEVER;
        }
        return ms;
      })
      .default(30 * 86_400_000),
    help:
      'a finished batch stays in Redis this long, then its exports are archived (verified) to ' +
      "VQ_ARCHIVE_DIR and its keys deleted by the workers' sweep (0 or off: keep in Redis for ever)",
  },
  VQ_ARCHIVE_DIR: {
    schema: z.string().min(1).optional(),
    help:
      'where archived batches are kept, one folder each with a manifest (default ' +
      '<VQ_ROOT>/batches): the long-term record, back it up',
  },
  VQ_KEEP_FAILED: {
    schema: duration.default(7 * 86_400_000),
    help: 'how long failed jobs stay in Redis (outcomes are kept separately)',
  },
  VQ_WEBHOOK_SECRET: {
    schema: z.string().min(1).optional(),
    help:
      'signing secret of the webhooks, `whsec_` + base64 of 24–64 random bytes (Standard ' +
      'Webhooks); needed for any callbackUrl',
  },
  VQ_WEBHOOK_SECRET_FILE: {
    schema: z.string().min(1).optional(),
    help: 'file holding the webhook secret instead of VQ_WEBHOOK_SECRET (read at start-up)',
  },
  VQ_WEBHOOK_ALLOW: {
    schema: z.string().min(1).optional(),
    help:
      'comma-separated hosts webhooks may be sent to (`hooks.example.com`, `*.example.com` for ' +
      'its subdomains); unset = any public host. Internal addresses (loopback, private, link-local, ' +
      'metadata) are refused unless a host is named here exactly (no wildcard)',
  },
  VQ_WEBHOOK_URL: {
    schema: z.url({ protocol: /^https?$/ }).optional(),
    help:
      'receives the account-level events (account.paused) of every account, besides each ' +
      "waiting batch's callbackUrl",
  },
  VQ_WATCH_MIN_EVERY: {
    schema: duration.default(60_000),
    help: 'shortest time between two rounds of a watch list (--every, or a cron line); tests shorten it',
  },
  VQ_WATCH_SWEEP: {
    schema: duration.default(5_000),
    help: 'how often a worker process looks for watch rounds whose batch is done, to compare them',
  },
  VQ_WATCH_IGNORE: {
    schema: z.string().default('id,queryId,createdAt,completedAt,updatedAt'),
    help: 'comma list of result fields (names or dotted paths) a watch never reports as changed; a watch adds its own',
  },
  VQ_WATCH_HISTORY: {
    schema: int(1, 1000).default(10),
    help: 'changes kept per plate of a watch (its last result is always kept)',
  },
  VQ_WATCH_KEEP_ROUNDS: {
    schema: int(1, 100_000).default(50),
    help: 'rounds of a watch whose changes stay readable (vqb watch changes --round N)',
  },
  VQ_WATCH_FORGET: {
    schema: duration.default(30 * 86_400_000),
    help: 'how long a plate taken off a watch keeps its last result and history',
  },
  VQ_WEBHOOK_ATTEMPTS: {
    schema: int(1, 100).default(15),
    help: 'tries per webhook delivery before it is given up (the same webhook-id on every try)',
  },
  VQ_WEBHOOK_BACKOFF: {
    schema: duration.default(1_000),
    help: 'first retry delay of a failed delivery, doubling each time (15 tries ≈ 4.5 h)',
  },
  VQ_WEBHOOK_TIMEOUT: {
    schema: duration.default(10_000),
    help: 'time a receiver has to answer a delivery; a slower one counts as failed (and is retried)',
  },
  VQ_PUBLIC_URL: {
    schema: z.url({ protocol: /^https?$/ }).optional(),
    help:
      'public base URL of `vqb serve` (https://vqb.example.com), for absolute results links in ' +
      'webhooks; unset: links are paths',
  },
  VQ_INBOX_NOTIFY_URL: {
    schema: z.url({ protocol: /^https?$/ }).optional(),
    help: 'callbackUrl of every batch the drop folder makes',
  },
  LOG_LEVEL: {
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    help: 'pino log level',
  },
  VQ_TRACE_PLATES: {
    schema: bool.default(false),
    help: "tracing on (OTEL_*): a plate's span carries the plate itself, not only its hash",
  },
} as const;

export type SettingName = keyof typeof SETTINGS;
export type Overrides = Partial<Record<SettingName, string>>;

export interface Config {
  baseUrl: string | undefined;
  apiKey: ApiKeySource | undefined;
  product: string;
  redisUrl: string;
  /** How to connect (mode, nodes, TLS, credentials): what connectRedis takes. */
  redis: RedisConnection;
  allowEviction: boolean;
  queueName: string;
  prefix: string;
  rateLimit: RateLimit;
  /** Every account the workers serve; `default` is built from the settings above when no file is given. */
  accounts: readonly Account[];
  pacingJitterMs: number;
  interactiveMax: number;
  /**
   * VQ_CONFIRM_ABOVE in millionths: `vqb run` on a terminal asks above it (money with a price, else
   * creates); undefined: never asks.
   */
  confirmAboveMicros: number | undefined;
  concurrency: number;
  maxInFlight: number;
  /** The clock deadlines are read on and shown in (VQ_TIME_ZONE, else the process's own zone). */
  timeZone: string;
  poll: {
    initialMs: number;
    intervalMs: number;
    maxIntervalMs: number;
    deadlineMs: number;
    adaptive: boolean;
    quantile: number;
    /** Interactive plates: first poll at most this soon, then this often. */
    interactiveMs: number;
  };
  attempts: number;
  backoffMs: number;
  recreateUncertain: boolean;
  budget: { perDay: number | undefined; perMonth: number | undefined; reuseWithinMs: number; reuseKeepMs: number };
  upstreamHttp: { connectTimeoutMs: number; requestTimeoutMs: number };
  locks: { lockDurationMs: number; stalledIntervalMs: number; maxStalledCount: number };
  outDir: string;
  csvDelimiter: ',' | ';' | '\t';
  /** VQ_EXPORT_LAYOUT: the CSV and .xlsx for people (readable) or for scripts (raw). */
  exportLayout: 'readable' | 'raw';
  /** VQ_LANG, else the locale's, else pt-BR: the exports' words and a run's report of them. */
  lang: Lang;
  root: string;
  keepFailedMs: number;
  /** Finished batches older than retainMs (0: never) are archived to archiveDir and deleted from Redis. */
  retention: { retainMs: number; archiveDir: string };
  http: {
    host: string;
    port: number;
    bodyLimit: number;
    maxPlates: number;
    /** Requests a minute per service token on /v1 (0: none). */
    rateLimitPerMin: number;
    requestTimeoutMs: number;
    tokens: TokenSource | undefined;
    trustProxy?: string[];
    /** Bytes the console's staged (unconfirmed) uploads may hold in Redis, all sessions together. */
    consoleUploadsMax: number;
  };
  inbox: { pollMs: number; stableMs: number };
  metricsPort: number | undefined;
  webhooks: WebhookSettings;
  watch: WatchSettings;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Tracing: plates in spans as themselves, not as a hash (VQ_TRACE_PLATES). */
  tracePlates: boolean;
}

export interface WatchSettings {
  minEveryMs: number;
  sweepMs: number;
  ignore: readonly string[];
  history: number;
  keepRounds: number;
  forgetMs: number;
}

/** `whsec_` + base64 of 24–64 bytes, as the Standard Webhooks specification asks of a secret. */
export function parseWebhookSecret(raw: string, variable: string): Secret {
  const text = raw.trim();
  const body = text.startsWith('whsec_') ? text.slice(6) : undefined;
  const bytes = body !== undefined && /^[A-Za-z0-9+/]+={0,2}$/.test(body) ? Buffer.from(body, 'base64').length : 0;
  if (bytes < 24 || bytes > 64) {
    throw new ConfigError(
      variable,
      'expected a webhook secret `whsec_` + base64 of 24–64 random bytes (e.g. `echo ' +
        'whsec_$(openssl rand -base64 32)`); the value given is not one (not shown)',
    );
  }
  return new Secret(text);
}

type Parsed = { [K in SettingName]: z.output<(typeof SETTINGS)[K]['schema']> };

/** A number check's failure in words ("must be a whole number from 1 to 1000"), or undefined. */
function issueText(issue: z.core.$ZodIssue | undefined): string | undefined {
  if (issue === undefined) return undefined;
  if (issue.code === 'custom') return `must be ${issue.message}`;
  const bound = (value: unknown) => (typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined);
  if (issue.code === 'too_small' && issue.origin === 'number') {
    const min = bound(issue.minimum);
    return min === undefined ? undefined : `must be at least ${min}`;
  }
  if (issue.code === 'too_big' && issue.origin === 'number') {
    const max = bound(issue.maximum);
    return max === undefined ? undefined : `must be at most ${max}`;
  }
  if (issue.code === 'invalid_type' && (issue.expected === 'number' || issue.expected === 'int'))
    return issue.expected === 'int' ? 'must be a whole number' : 'must be a number';
  return undefined;
}

/**
 * Reads every setting from `env`, with `overrides` (CLI flags) taking precedence. Throws a
 * ConfigError naming the first bad variable; empty strings count as unset.
 */
export function loadConfig(env: Record<string, string | undefined>, overrides: Overrides = {}): Config {
  const v = parseSettings(env, overrides);

  const rateLimit = parseRateLimit(v.VQ_RATE_LIMIT);
  if (!rateLimit)
    throw new ConfigError(
      'VQ_RATE_LIMIT',
      `expected auto, auto<=300/min or a rate such as 60/min or 5/s; got ${JSON.stringify(v.VQ_RATE_LIMIT)}`,
    );
  if (v.VQ_API_KEY && v.VQ_API_KEY_FILE)
    throw new ConfigError('VQ_API_KEY_FILE', 'set either VQ_API_KEY or VQ_API_KEY_FILE, not both');
  if (v.VQ_POLL_DEADLINE <= v.VQ_POLL_INITIAL)
    throw new ConfigError('VQ_POLL_DEADLINE', 'must be longer than VQ_POLL_INITIAL');

  const tokens = tokensFrom(v);

  const answers: AnswerMapping = {
    ...(v.VQ_ANSWER_ID !== undefined ? { id: v.VQ_ANSWER_ID } : {}),
    ...(v.VQ_ANSWER_STATUS !== undefined ? { status: v.VQ_ANSWER_STATUS } : {}),
    ...(v.VQ_ANSWER_RESULT !== undefined ? { result: v.VQ_ANSWER_RESULT } : {}),
    pending: stateList(v.VQ_STATES_PENDING),
    done: stateList(v.VQ_STATES_DONE),
    failed: stateList(v.VQ_STATES_FAILED),
  };

  let apiKey: ApiKeySource | undefined;
  if (v.VQ_API_KEY) apiKey = { kind: 'inline', secret: new Secret(v.VQ_API_KEY) };
  else if (v.VQ_API_KEY_FILE) apiKey = { kind: 'file', path: v.VQ_API_KEY_FILE };

  const { webhookSecret, webhookAllow } = webhookTargetsFrom(v);

  const baseUrl = v.VQ_BASE_URL?.replace(/\/+$/, '');
  const price = priceFrom(v);
  const redis = redisConnectionFrom(v);
  const accounts = accountsFrom(v, { baseUrl, apiKey, rateLimit, price, answers });
  // A pooled batch's Redis steps touch two accounts' keys at once (docs/plans.md): refused at load
  // on a Cluster, where those keys live in other slots, rather than failing at the first plate.
  const pooled = accounts.find((a) => a.pool !== undefined);
  if (redis.mode === 'cluster' && pooled !== undefined)
    throw new PoolError(
      pooled.pool!,
      v.VQ_ACCOUNTS_FILE ?? 'VQ_ACCOUNTS_FILE',
      'pools of keys need one Redis (standalone or Sentinel), not a Redis Cluster (VQ_REDIS_MODE=cluster)',
    );
  return Object.freeze({
    baseUrl,
    apiKey,
    product: v.VQ_PRODUCT,
    redisUrl: v.REDIS_URL,
    redis,
    allowEviction: v.VQ_ALLOW_EVICTION,
    queueName: v.VQ_QUEUE,
    prefix: v.VQ_PREFIX,
    rateLimit,
    accounts,
    pacingJitterMs: v.VQ_PACING_JITTER,
    interactiveMax: v.VQ_INTERACTIVE_MAX,
    confirmAboveMicros: v.VQ_CONFIRM_ABOVE === 'off' ? undefined : parseAmountMicros(v.VQ_CONFIRM_ABOVE),
    concurrency: v.VQ_CONCURRENCY,
    maxInFlight: v.VQ_MAX_IN_FLIGHT,
    timeZone: v.VQ_TIME_ZONE ?? localZone(),
    poll: {
      initialMs: v.VQ_POLL_INITIAL,
      intervalMs: v.VQ_POLL_INTERVAL,
      maxIntervalMs: Math.max(v.VQ_POLL_MAX_INTERVAL, v.VQ_POLL_INTERVAL),
      deadlineMs: v.VQ_POLL_DEADLINE,
      adaptive: v.VQ_POLL_ADAPTIVE,
      quantile: v.VQ_POLL_QUANTILE,
      interactiveMs: v.VQ_POLL_INTERACTIVE,
    },
    attempts: v.VQ_ATTEMPTS,
    backoffMs: v.VQ_BACKOFF,
    recreateUncertain: v.VQ_RECREATE_UNCERTAIN,
    budget: {
      perDay: v.VQ_MAX_CREATES_PER_DAY,
      perMonth: v.VQ_MAX_CREATES_PER_MONTH,
      reuseWithinMs: v.VQ_REUSE_WITHIN,
      reuseKeepMs: v.VQ_REUSE_KEEP,
    },
    upstreamHttp: { connectTimeoutMs: v.VQ_CONNECT_TIMEOUT, requestTimeoutMs: v.VQ_REQUEST_TIMEOUT },
    locks: {
      lockDurationMs: v.VQ_LOCK_DURATION,
      stalledIntervalMs: v.VQ_STALLED_INTERVAL,
      maxStalledCount: v.VQ_MAX_STALLED,
    },
    outDir: v.VQ_OUT_DIR,
    csvDelimiter: v.VQ_CSV_DELIMITER === 'tab' ? '\t' : v.VQ_CSV_DELIMITER,
    exportLayout: v.VQ_EXPORT_LAYOUT,
    lang: processLang(v.VQ_LANG, env),
    root: v.VQ_ROOT,
    keepFailedMs: v.VQ_KEEP_FAILED,
    retention: { retainMs: v.VQ_RETAIN, archiveDir: v.VQ_ARCHIVE_DIR ?? `${v.VQ_ROOT}/batches` },
    http: httpFrom(v, tokens),
    inbox: { pollMs: v.VQ_INBOX_POLL, stableMs: v.VQ_INBOX_STABLE },
    metricsPort: v.VQ_METRICS_PORT,
    webhooks: {
      secret: webhookSecret,
      allow: webhookAllow,
      url: v.VQ_WEBHOOK_URL,
      attempts: v.VQ_WEBHOOK_ATTEMPTS,
      backoffMs: v.VQ_WEBHOOK_BACKOFF,
      timeoutMs: v.VQ_WEBHOOK_TIMEOUT,
      publicUrl: v.VQ_PUBLIC_URL?.replace(/\/+$/, ''),
      inboxNotifyUrl: v.VQ_INBOX_NOTIFY_URL,
    },
    watch: {
      minEveryMs: v.VQ_WATCH_MIN_EVERY,
      sweepMs: v.VQ_WATCH_SWEEP,
      ignore: v.VQ_WATCH_IGNORE.split(',')
        .map((f) => f.trim())
        .filter((f) => f !== ''),
      history: v.VQ_WATCH_HISTORY,
      keepRounds: v.VQ_WATCH_KEEP_ROUNDS,
      forgetMs: v.VQ_WATCH_FORGET,
    },
    logLevel: v.LOG_LEVEL,
    tracePlates: v.VQ_TRACE_PLATES,
  });
}

/** The accounts: the accounts file's, or one `default` account made of the settings above. */
function accountsFrom(
  v: Parsed,
  shared: {
    baseUrl: string | undefined;
    apiKey: ApiKeySource | undefined;
    rateLimit: RateLimit;
    price: Price | undefined;
    answers: AnswerMapping;
  },
): Account[] {
  const { baseUrl, apiKey, rateLimit, price, answers } = shared;
  return v.VQ_ACCOUNTS_FILE
    ? loadAccountsFile(v.VQ_ACCOUNTS_FILE, { baseUrl, product: v.VQ_PRODUCT, rateLimit, price, answers })
    : [
        defaultAccount({
          baseUrl,
          apiKey,
          product: v.VQ_PRODUCT,
          rateLimit,
          perDay: v.VQ_MAX_CREATES_PER_DAY,
          perMonth: v.VQ_MAX_CREATES_PER_MONTH,
          price,
          answers,
        }),
      ];
}

/** The HTTP server's settings (`vqb serve`). */
function httpFrom(v: Parsed, tokens: TokenSource | undefined): Config['http'] {
  return {
    host: v.VQ_HTTP_HOST,
    port: v.VQ_HTTP_PORT,
    bodyLimit: v.VQ_HTTP_BODY_LIMIT,
    maxPlates: v.VQ_HTTP_MAX_PLATES,
    rateLimitPerMin: v.VQ_API_RATE_LIMIT,
    requestTimeoutMs: v.VQ_HTTP_REQUEST_TIMEOUT,
    tokens,
    consoleUploadsMax: v.VQ_CONSOLE_UPLOADS_MAX,
    ...(v.VQ_HTTP_TRUST_PROXY
      ? {
          trustProxy: v.VQ_HTTP_TRUST_PROXY.split(',')
            .map((p) => p.trim())
            .filter((p) => p !== ''),
        }
      : {}),
  };
}

/** Every setting read and checked against its schema; a value that fails is a ConfigError naming it. */
function parseSettings(env: Record<string, string | undefined>, overrides: Overrides): Parsed {
  const values: Record<string, unknown> = {};
  for (const name of Object.keys(SETTINGS) as SettingName[]) {
    const raw = overrides[name] ?? env[name];
    const result = SETTINGS[name].schema.safeParse(raw === '' ? undefined : raw);
    if (!result.success) {
      // A Redis URL may hold a password: never echo it.
      const shown = name === 'REDIS_URL' ? raw?.replace(/\/\/[^@/]*@/g, '//***@') : raw;
      const wanted = issueText(result.error.issues[0]);
      // What is wrong first; the setting's description only when the check has no words of its own.
      throw new ConfigError(
        name,
        wanted !== undefined
          ? `${wanted}; got ${JSON.stringify(shown)}`
          : `expected ${SETTINGS[name].help}; got ${JSON.stringify(shown)} ` +
              `(${result.error.issues[0]?.message ?? 'invalid'})`,
      );
    }
    values[name] = result.data;
  }
  return values as Parsed;
}

/** The service tokens of the HTTP API: inline (VQ_API_TOKENS) or a file (VQ_API_TOKENS_FILE). */
function tokensFrom(v: Parsed): TokenSource | undefined {
  if (v.VQ_API_TOKENS && v.VQ_API_TOKENS_FILE)
    throw new ConfigError('VQ_API_TOKENS_FILE', 'set either VQ_API_TOKENS or VQ_API_TOKENS_FILE, not both');
  if (v.VQ_API_TOKENS) {
    const list = v.VQ_API_TOKENS.split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    if (list.some((t) => t.length < 16))
      throw new ConfigError('VQ_API_TOKENS', 'expected tokens of at least 16 characters, comma-separated');
    return { kind: 'inline', secrets: list.map((t) => new Secret(t)) };
  } else if (v.VQ_API_TOKENS_FILE) {
    return { kind: 'file', path: v.VQ_API_TOKENS_FILE };
  }
  return undefined;
}

/** The webhook secret and allow-list, and the configured URLs checked against them. */
function webhookTargetsFrom(v: Parsed): { webhookSecret: Secret | undefined; webhookAllow: string[] } {
  if (v.VQ_WEBHOOK_SECRET && v.VQ_WEBHOOK_SECRET_FILE)
    throw new ConfigError('VQ_WEBHOOK_SECRET_FILE', 'set either VQ_WEBHOOK_SECRET or VQ_WEBHOOK_SECRET_FILE, not both');
  let webhookSecret: Secret | undefined;
  if (v.VQ_WEBHOOK_SECRET) webhookSecret = parseWebhookSecret(v.VQ_WEBHOOK_SECRET, 'VQ_WEBHOOK_SECRET');
  else if (v.VQ_WEBHOOK_SECRET_FILE) {
    let text: string;
    try {
      text = readFileSync(v.VQ_WEBHOOK_SECRET_FILE, 'utf8');
    } catch {
      throw new ConfigError(
        'VQ_WEBHOOK_SECRET_FILE',
        `expected a readable file holding the webhook secret; cannot read ${v.VQ_WEBHOOK_SECRET_FILE}`,
      );
    }
    webhookSecret = parseWebhookSecret(text, 'VQ_WEBHOOK_SECRET_FILE');
  }
  if ((v.VQ_WEBHOOK_URL || v.VQ_INBOX_NOTIFY_URL) && !webhookSecret) {
    throw new ConfigError(
      v.VQ_WEBHOOK_URL ? 'VQ_WEBHOOK_URL' : 'VQ_INBOX_NOTIFY_URL',
      'webhooks are signed: set VQ_WEBHOOK_SECRET (or VQ_WEBHOOK_SECRET_FILE) too',
    );
  }
  const webhookAllow = (v.VQ_WEBHOOK_ALLOW ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
  if (webhookAllow.some((h) => !/^(\*\.)?[a-z0-9.-]+(:\d+)?$|^\[[0-9a-f:.]+\](:\d+)?$/.test(h))) {
    throw new ConfigError(
      'VQ_WEBHOOK_ALLOW',
      `expected host names such as hooks.example.com or *.example.com, comma-separated; got ` +
        `${JSON.stringify(v.VQ_WEBHOOK_ALLOW)}`,
    );
  }

  for (const name of ['VQ_WEBHOOK_URL', 'VQ_INBOX_NOTIFY_URL'] as const) {
    const url = v[name];
    if (url !== undefined && !hostAllowed(new URL(url).host, webhookAllow))
      throw new ConfigError(name, `expected a URL whose host is on VQ_WEBHOOK_ALLOW; ${new URL(url).host} is not`);
    const internal = url !== undefined ? forbiddenHost(new URL(url), webhookAllow) : undefined;
    if (internal !== undefined)
      throw new ConfigError(
        name,
        `${new URL(url as string).host} is ${internal}: name that host exactly on VQ_WEBHOOK_ALLOW ` +
          `to send webhooks there`,
      );
  }
  return { webhookSecret, webhookAllow };
}

/** VQ_PRICE_PER_QUERY in VQ_CURRENCY (with VQ_PRICE_PER_POLL); undefined when no price is set. */
function priceFrom(v: Parsed): Price | undefined {
  if (!isCurrency(v.VQ_CURRENCY))
    throw new ConfigError('VQ_CURRENCY', `expected an ISO 4217 code such as BRL; got ${JSON.stringify(v.VQ_CURRENCY)}`);
  const perPollMicros = priceMicros('VQ_PRICE_PER_POLL', v.VQ_PRICE_PER_POLL);
  if (v.VQ_PRICE_PER_QUERY === undefined) return undefined;
  return {
    perQueryMicros: priceMicros('VQ_PRICE_PER_QUERY', v.VQ_PRICE_PER_QUERY),
    perPollMicros,
    currency: v.VQ_CURRENCY,
  };
}

function redisConnectionFrom(v: Parsed): RedisConnection {
  return parseRedisConnection({
    mode: v.VQ_REDIS_MODE,
    url: v.REDIS_URL,
    prefix: v.VQ_PREFIX,
    passwordFile: v.REDIS_PASSWORD_FILE,
    caFile: v.REDIS_TLS_CA_FILE,
    sentinels: v.REDIS_SENTINELS,
    sentinelName: v.REDIS_SENTINEL_NAME,
    sentinelPasswordFile: v.REDIS_SENTINEL_PASSWORD_FILE,
    replicaAcks: v.VQ_REDIS_REPLICA_ACKS,
  });
}
