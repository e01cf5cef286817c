// `vqb simulate` flags → simulator options. A --config JSON file is read first; flags override it.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, UsageError } from '../errors.js';
import { parseDuration } from '../setting-values.js';
import { ANSWER_SHAPES, parseAnswersAfter } from './answers.js';
import { type KeySpec, PERMISSIONS, type Permission, type SimulatorOptions, validatePatch } from './options.js';

export const SIMULATOR_USAGE = `vqb simulate [flags]   run a stand-in for the paid vehicle API
  --config <file.json>         options as JSON (same names as below in camelCase); flags override it
  --host <host>                default 127.0.0.1
  --port <n>                   default 0 (a free port)
  --products <a,b>             accepted product slugs, default agregados
  --key <name[:perm,perm]>     repeatable; perms: ${PERMISSIONS.join(', ')} or all (default all)
  --rate-limit <n/unit>        per key, default 600/min
  --window <kind>              fixed | sliding | token-bucket, default sliding
  --daily-quota <n>            per key, default 100000
  --quota-window <duration>    quota window length (default: UTC day), e.g. 10s
  --completion <min-max>       query completion delay, default 5s-15s
  --fail-rate <0..1>           share of queries ending FAILED
  --fail-plates <A,B>          plates that always fail (VEHICLE_NOT_FOUND)
  --terminal-on-create-rate <0..1>  share of creates answered COMPLETED at once
  --query-ttl <duration>       queries are forgotten after this (404)
  --no-envelope                success bodies without {statusCode, body}
  --id-field <queryId|id>      name of the query id field
  --answers <shape>            the shape of success bodies: default, pt (Portuguese states, id as
                               id), data (everything in data), unknown (an id and states vqb does
                               not know), new-state (a pending state vqb does not know)
  --answers-after <N:shape>    switch to that shape once N queries were created (e.g. 20:new-state)
  --error-rate <0..1>          share answered 500/502/503
  --latency <min-max>          added delay before each response, e.g. 50-200ms
  --drop-rate <0..1>           share of connections dropped without a response
  --drop-after-create-rate <0..1>  share of creates dropped after the query is created
  --max-body <bytes>           default 1048576
  --no-rate-limit-headers      send no X-RateLimit-* headers (clients learn only from 429s)
  Faults after the query was made (and paid):
  --slow-create-rate <0..1>    share of creates answered only after --slow-create (default 40s)
  --slow-create <duration>
  --gateway-error-after-create-rate <0..1>  share answered 502 with a gateway's HTML page
  --cut-body-after-create-rate <0..1>       share whose 201 body is cut off by a reset
  --truncated-body-after-create-rate <0..1> share answered 201 with truncated JSON
  --stall-body-after-create-rate <0..1>     share whose 201 body never comes
  --poll-not-found-once-rate <0..1>         share of queries whose first poll is a 404
  --retry-after-date           429s carry Retry-After as an HTTP date
  --query-cost <amount>        creates say their price (x-query-cost: <amount>, x-billed: true);
                               polls say x-billed: false`;

const FLAGS = {
  config: { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  products: { type: 'string' },
  key: { type: 'string', multiple: true },
  'rate-limit': { type: 'string' },
  window: { type: 'string' },
  'daily-quota': { type: 'string' },
  'quota-window': { type: 'string' },
  completion: { type: 'string' },
  'fail-rate': { type: 'string' },
  'fail-plates': { type: 'string' },
  'terminal-on-create-rate': { type: 'string' },
  'query-ttl': { type: 'string' },
  'no-envelope': { type: 'boolean' },
  'id-field': { type: 'string' },
  answers: { type: 'string' },
  'answers-after': { type: 'string' },
  'error-rate': { type: 'string' },
  latency: { type: 'string' },
  'drop-rate': { type: 'string' },
  'drop-after-create-rate': { type: 'string' },
  'max-body': { type: 'string' },
  'no-rate-limit-headers': { type: 'boolean' },
  'slow-create-rate': { type: 'string' },
  'slow-create': { type: 'string' },
  'gateway-error-after-create-rate': { type: 'string' },
  'cut-body-after-create-rate': { type: 'string' },
  'truncated-body-after-create-rate': { type: 'string' },
  'stall-body-after-create-rate': { type: 'string' },
  'poll-not-found-once-rate': { type: 'string' },
  'retry-after-date': { type: 'boolean' },
  'query-cost': { type: 'string' },
} as const;

/** Parses `vqb simulate` flags (argv without the command name). Throws UsageError / ConfigError. */
export function parseSimulatorArgs(argv: string[]): Partial<SimulatorOptions> {
  let values: ReturnType<
    typeof parseArgs<{ args: string[]; options: typeof FLAGS; strict: true; allowPositionals: false }>
  >['values'];
  try {
    values = parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n${SIMULATOR_USAGE}`);
  }

  const out: Record<string, unknown> = values.config === undefined ? {} : readConfigFile(values.config);
  const num = (flag: string, text: string | undefined): number | undefined => {
    if (text === undefined) return undefined;
    const value = Number(text);
    if (text.trim() === '' || !Number.isFinite(value))
      throw new UsageError(`--${flag}: expected a number, got ${JSON.stringify(text)}`);
    return value;
  };
  const set = (name: keyof SimulatorOptions, value: unknown) => {
    if (value !== undefined) out[name] = value;
  };

  set('host', values.host);
  set('port', num('port', values.port));
  set(
    'products',
    values.products
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  if (values.key) set('keys', values.key.map(parseKeyFlag));
  set('rateLimit', values['rate-limit']);
  set('window', values.window);
  set('dailyQuota', num('daily-quota', values['daily-quota']));
  set(
    'quotaWindowMs',
    values['quota-window'] === undefined ? undefined : duration('quota-window', values['quota-window']),
  );
  set('completionMs', values.completion === undefined ? undefined : parseRange('completion', values.completion));
  set('failRate', num('fail-rate', values['fail-rate']));
  set(
    'failPlates',
    values['fail-plates']
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  set('terminalOnCreateRate', num('terminal-on-create-rate', values['terminal-on-create-rate']));
  set('queryTtlMs', values['query-ttl'] === undefined ? undefined : duration('query-ttl', values['query-ttl']));
  if (values['no-envelope']) set('envelope', false);
  set('idField', values['id-field']);
  set('answers', values.answers);
  if (values['answers-after'] !== undefined) {
    const after = parseAnswersAfter(values['answers-after']);
    if (!after)
      throw new UsageError(`--answers-after takes N:shape, e.g. 20:new-state (shapes: ${ANSWER_SHAPES.join(', ')})`);
    set('answersAfter', after);
  }
  set('errorRate', num('error-rate', values['error-rate']));
  set('latencyMs', values.latency === undefined ? undefined : parseRange('latency', values.latency));
  set('dropRate', num('drop-rate', values['drop-rate']));
  set('dropAfterCreateRate', num('drop-after-create-rate', values['drop-after-create-rate']));
  set('maxBodyBytes', num('max-body', values['max-body']));
  if (values['no-rate-limit-headers']) set('rateLimitHeaders', false);
  set('slowCreateRate', num('slow-create-rate', values['slow-create-rate']));
  set('slowCreateMs', values['slow-create'] === undefined ? undefined : duration('slow-create', values['slow-create']));
  set('gatewayErrorAfterCreateRate', num('gateway-error-after-create-rate', values['gateway-error-after-create-rate']));
  set('cutBodyAfterCreateRate', num('cut-body-after-create-rate', values['cut-body-after-create-rate']));
  set(
    'truncatedBodyAfterCreateRate',
    num('truncated-body-after-create-rate', values['truncated-body-after-create-rate']),
  );
  set('stallBodyAfterCreateRate', num('stall-body-after-create-rate', values['stall-body-after-create-rate']));
  set('pollNotFoundOnceRate', num('poll-not-found-once-rate', values['poll-not-found-once-rate']));
  if (values['retry-after-date']) set('retryAfterFormat', 'date');
  set('queryCost', values['query-cost']);

  return validatePatch(out, values.config === undefined ? 'simulate flags' : `simulate flags / ${values.config}`);
}

function readConfigFile(path: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError('--config', `expected a readable JSON file at ${path} (${(error as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError('--config', `expected a JSON object in ${path}`);
  }
  return parsed as Record<string, unknown>;
}

function duration(flag: string, text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined)
    throw new UsageError(`--${flag}: expected a duration such as 500ms, 10s or 5m, got ${JSON.stringify(text)}`);
  return ms;
}

/** `100-400`, `100,400`, `1s-3s`, `50-200ms` (a unit after the max applies to both), or one value. */
export function parseRange(flag: string, text: string): [number, number] {
  const parts = text.split(/[-,]/).map((s) => s.trim());
  if (parts.length === 1) {
    const ms = duration(flag, parts[0]!);
    return [ms, ms];
  }
  if (parts.length !== 2) throw new UsageError(`--${flag}: expected min-max, got ${JSON.stringify(text)}`);
  const unit = /[a-z]+$/i.exec(parts[1]!)?.[0] ?? '';
  const first = /[a-z]$/i.test(parts[0]!) ? parts[0]! : parts[0]! + unit;
  return [duration(flag, first), duration(flag, parts[1]!)];
}

/** `name` (all permissions), `name:all`, or `name:run_queries,view_queries`. */
export function parseKeyFlag(text: string): KeySpec {
  const at = text.indexOf(':');
  const key = at === -1 ? text : text.slice(0, at);
  if (key === '') throw new UsageError(`--key: expected name[:perm,perm], got ${JSON.stringify(text)}`);
  if (at === -1) return { key };
  const perms = text
    .slice(at + 1)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (perms.length === 1 && perms[0] === 'all') return { key, permissions: [...PERMISSIONS] };
  for (const perm of perms) {
    if (!PERMISSIONS.includes(perm as Permission)) {
      throw new UsageError(
        `--key ${key}: unknown permission ${JSON.stringify(perm)} (one of ${PERMISSIONS.join(', ')}, or all)`,
      );
    }
  }
  return { key, permissions: perms as Permission[] };
}
