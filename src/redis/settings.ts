// How vqb reaches Redis, parsed once from the settings (src/config.ts calls this): the mode, the
// nodes, TLS and credentials. Files (password, CA) are read here, at start-up, so a missing file
// is one ConfigError line naming its variable instead of a connection that fails later.
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { Secret } from '../setting-values.js';

export type RedisMode = 'standalone' | 'cluster' | 'sentinel';

export interface RedisNode {
  host: string;
  port: number;
}

export interface RedisConnection {
  mode: RedisMode;
  /** standalone: the server; cluster: the seed nodes; sentinel: the sentinels. */
  nodes: readonly RedisNode[];
  /** sentinel: the name the sentinels monitor the primary under. */
  sentinelName?: string;
  username?: string;
  password?: Secret;
  sentinelPassword?: Secret;
  db: number;
  /** Present with rediss://: TLS to every Redis node (and to the sentinels), trusting `ca` when given. */
  tls?: { ca?: string };
  /** Where, for messages and logs: never a password. */
  display: string;
  /** The setting an operator changes when Redis cannot be reached. */
  setting: string;
  /**
   * Replicas that must hold a paid write (an outcome, a query id) before it counts as stored
   * (redis/replica-ack.ts): replication is asynchronous, and a failover promotes a replica that
   * may lack what the old primary acknowledged. 1 in sentinel mode, else 0 unless set.
   */
  replicaAcks: number;
}

export interface RedisSettingsInput {
  mode: RedisMode;
  url: string;
  prefix: string;
  passwordFile?: string | undefined;
  caFile?: string | undefined;
  sentinels?: string | undefined;
  sentinelName?: string | undefined;
  sentinelPasswordFile?: string | undefined;
  /** VQ_REDIS_REPLICA_ACKS; undefined: the mode's default. */
  replicaAcks?: number | undefined;
}

/** The hash tag Redis Cluster hashes a key by: the text between the first `{` and the next `}`, if not empty. */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

function readSecretFile(variable: string, path: string): Secret {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      variable,
      `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const value = text.trim();
  if (!value) throw new ConfigError(variable, `${path} is empty`);
  return new Secret(value);
}

function parseUrl(text: string): URL {
  try {
    const url = new URL(text.trim());
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new Error('scheme');
    return url;
  } catch {
    // The text may hold a password: name its shape only.
    throw new ConfigError(
      'REDIS_URL',
      `expected redis://host:port or rediss://host:port (comma-separated in cluster mode); got ` +
        `${JSON.stringify(text.replace(/\/\/[^@/]*@/, '//***@'))}`,
    );
  }
}

function parseHostPort(variable: string, text: string): RedisNode {
  const match = /^\s*\[?([^\s\]]+?)\]?:(\d{1,5})\s*$/.exec(text);
  const port = Number(match?.[2]);
  if (!match || port < 1 || port > 65535)
    throw new ConfigError(variable, `expected host:port, comma-separated; got ${JSON.stringify(text)}`);
  return { host: match[1]!, port };
}

export function parseRedisConnection(input: RedisSettingsInput): RedisConnection {
  const { mode } = input;
  const urls = seedUrls(input);
  const first = urls[0]!;
  const tls = first.protocol === 'rediss:';
  const db = databaseOf(first, mode);
  const ca = readCa(input, tls);
  if (mode !== 'sentinel') refuseSentinelSettings(input);
  const { username, password } = credentials(first, input);
  const common: ConnectionCommon = {
    db,
    replicaAcks: replicaAcksOf(input),
    ...(username !== undefined ? { username } : {}),
    ...(password ? { password } : {}),
    ...(tls ? { tls: ca ? { ca } : {} } : {}),
  };
  if (mode === 'sentinel') return sentinelConnection(input, common, tls);
  const scheme = tls ? 'rediss' : 'redis';
  if (mode === 'cluster') {
    // The structures all accounts share live under the prefix, and some move together (a batch
    // listed with its account): its hash tag keeps them in one slot. Each account's keys have
    // a tag of their own (keys.ts).
    if (hashTagOf(input.prefix) === undefined) {
      throw new ConfigError(
        'VQ_PREFIX',
        `Redis Cluster needs a prefix with a {hash tag} so that the keys all accounts share land in ` +
          `one slot, e.g. {vqb} or {vqb-prod}; got ${JSON.stringify(input.prefix)}`,
      );
    }
    const nodes = urls.map(nodeOf);
    return {
      mode,
      nodes,
      ...common,
      display: `cluster ${scheme}://${nodes.map(hostPort).join(',')}`,
      setting: 'REDIS_URL',
    };
  }
  const node = nodeOf(first);
  return {
    mode,
    nodes: [node],
    ...common,
    display: `${scheme}://${hostPort(node)}${db ? `/${db}` : ''}`,
    setting: 'REDIS_URL',
  };
}

/** What every mode's connection shares: the database, the credentials, TLS. */
type ConnectionCommon = Pick<RedisConnection, 'db' | 'username' | 'password' | 'tls' | 'replicaAcks'>;

/**
 * How many replicas confirm a paid write. Sentinel exists to fail over, so there it is 1 unless
 * set. A Cluster cannot have it: WAIT names no key, so ioredis would send it to any node, not the
 * one that took the write.
 */
function replicaAcksOf(input: RedisSettingsInput): number {
  if (input.mode === 'cluster' && (input.replicaAcks ?? 0) > 0)
    throw new ConfigError(
      'VQ_REDIS_REPLICA_ACKS',
      'cannot be used with VQ_REDIS_MODE=cluster (WAIT would reach a node other than the one that ' +
        'took the write); leave it unset',
    );
  return input.replicaAcks ?? (input.mode === 'sentinel' ? 1 : 0);
}

const hostPort = (n: RedisNode) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`;
const nodeOf = (u: URL): RedisNode => ({ host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 6379) });

/** REDIS_URL's URLs: one, or several seed nodes of a cluster, all of one scheme. */
function seedUrls(input: RedisSettingsInput): URL[] {
  const urls = input.url
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean)
    .map(parseUrl);
  if (urls.length > 1 && input.mode !== 'cluster')
    throw new ConfigError(
      'REDIS_URL',
      `one URL expected in ${input.mode} mode (several seed nodes only with VQ_REDIS_MODE=cluster)`,
    );
  const first = urls[0]!;
  if (urls.some((u) => u.protocol !== first.protocol))
    throw new ConfigError('REDIS_URL', 'mixes redis:// and rediss://: use one scheme for every node');
  return urls;
}

/** The database number after the host (/0, /2); a Cluster has only 0. */
function databaseOf(first: URL, mode: RedisSettingsInput['mode']): number {
  const dbText = first.pathname.replace(/^\//, '');
  const db = dbText === '' ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0)
    throw new ConfigError(
      'REDIS_URL',
      `expected a database number after the host (/0, /2); got ${JSON.stringify(first.pathname)}`,
    );
  if (mode === 'cluster' && db !== 0)
    throw new ConfigError('REDIS_URL', 'Redis Cluster has only database 0: drop the /<db> from the URL');
  return db;
}

/** The user and password: from the URL, or the password from REDIS_PASSWORD_FILE (not both). */
function credentials(first: URL, input: RedisSettingsInput): { username?: string; password?: Secret } {
  const username = first.username ? decodeURIComponent(first.username) : undefined;
  const urlPassword = first.password ? decodeURIComponent(first.password) : undefined;
  if (urlPassword !== undefined && input.passwordFile)
    throw new ConfigError('REDIS_PASSWORD_FILE', 'set either a password in REDIS_URL or REDIS_PASSWORD_FILE, not both');
  const password = input.passwordFile
    ? readSecretFile('REDIS_PASSWORD_FILE', input.passwordFile)
    : urlPassword !== undefined
      ? new Secret(urlPassword)
      : undefined;
  return { ...(username !== undefined ? { username } : {}), ...(password ? { password } : {}) };
}

/** REDIS_TLS_CA_FILE's certificate, read once; only with rediss://. */
function readCa(input: RedisSettingsInput, tls: boolean): string | undefined {
  if (!input.caFile) return undefined;
  if (!tls)
    throw new ConfigError(
      'REDIS_TLS_CA_FILE',
      'is set but REDIS_URL is not rediss://: TLS is only used with rediss:// URLs',
    );
  let ca: string;
  try {
    ca = readFileSync(input.caFile, 'utf8');
  } catch (err) {
    throw new ConfigError(
      'REDIS_TLS_CA_FILE',
      `cannot read ${input.caFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  if (!ca.includes('-----BEGIN CERTIFICATE-----'))
    throw new ConfigError('REDIS_TLS_CA_FILE', `${input.caFile} holds no PEM certificate`);
  return ca;
}

/** The sentinel settings mean nothing in the other modes: set there, they are a mistake to say. */
function refuseSentinelSettings(input: RedisSettingsInput): void {
  for (const v of ['sentinels', 'sentinelName', 'sentinelPasswordFile'] as const) {
    if (input[v])
      throw new ConfigError(
        {
          sentinels: 'REDIS_SENTINELS',
          sentinelName: 'REDIS_SENTINEL_NAME',
          sentinelPasswordFile: 'REDIS_SENTINEL_PASSWORD_FILE',
        }[v],
        'only used with VQ_REDIS_MODE=sentinel',
      );
  }
}

function sentinelConnection(input: RedisSettingsInput, common: ConnectionCommon, tls: boolean): RedisConnection {
  if (!input.sentinels)
    throw new ConfigError(
      'REDIS_SENTINELS',
      'sentinel mode needs the sentinels: REDIS_SENTINELS=host:26379,host2:26379,…',
    );
  if (!input.sentinelName)
    throw new ConfigError(
      'REDIS_SENTINEL_NAME',
      'sentinel mode needs the name the sentinels monitor the primary under (sentinel monitor ' +
        '<name> …), e.g. mymaster',
    );
  const nodes = input.sentinels
    .split(',')
    .filter((s) => s.trim())
    .map((s) => parseHostPort('REDIS_SENTINELS', s));
  if (nodes.length === 0) throw new ConfigError('REDIS_SENTINELS', 'lists no sentinel');
  const sentinelPassword = input.sentinelPasswordFile
    ? readSecretFile('REDIS_SENTINEL_PASSWORD_FILE', input.sentinelPasswordFile)
    : undefined;
  return {
    mode: 'sentinel',
    nodes,
    sentinelName: input.sentinelName,
    ...common,
    ...(sentinelPassword ? { sentinelPassword } : {}),
    display: `sentinel ${input.sentinelName} via ${nodes.map(hostPort).join(',')}${tls ? ' (TLS)' : ''}`,
    setting: 'REDIS_SENTINELS',
  };
}
