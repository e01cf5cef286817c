// Config: defaults, one ConfigError naming the bad variable, overrides over env, and a key that
// never shows when a Config is logged or serialised.
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { accountOf, parseAccounts, requireAccountUpstream } from '../../src/accounts/account.js';
import { type Config, loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { parseDuration, parseRateLimit, Secret } from '../../src/setting-values.js';

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('accounts', () => {
  it('without VQ_ACCOUNTS_FILE the settings form one account, default', () => {
    const c = loadConfig({
      VQ_BASE_URL: 'https://api.example.com',
      VQ_API_KEY: 'k',
      VQ_RATE_LIMIT: '5/s',
      VQ_MAX_CREATES_PER_DAY: '10',
    });
    expect(c.accounts).toHaveLength(1);
    expect(c.accounts[0]).toMatchObject({
      id: 'default',
      baseUrl: 'https://api.example.com',
      rateLimit: { max: 5, durationMs: 1_000 },
      perDay: 10,
      product: 'agregados',
    });
  });

  it("parses the issue's shape, with defaults from the environment, and names what is wrong", () => {
    const defaults = { baseUrl: 'https://api.example.com', product: 'agregados', rateLimit: parseRateLimit('60/min')! };
    const accounts = parseAccounts(
      JSON.stringify({
        accounts: [
          { id: 'frota', apiKeyFile: '/run/secrets/frota', rateLimit: '300/min', maxCreatesPerDay: 10000 },
          { id: 'seguros', apiKeyFile: '/run/secrets/seg', rateLimit: '60/min' },
        ],
      }),
      defaults,
    );
    expect(accounts.map((a) => [a.id, a.rateLimit.text, a.perDay, a.baseUrl])).toEqual([
      ['frota', '300/min', 10000, 'https://api.example.com'],
      ['seguros', '60/min', undefined, 'https://api.example.com'],
    ]);
    expect(accounts[0]!.apiKey).toEqual({ kind: 'file', path: '/run/secrets/frota' });
    for (const [text, message] of [
      ['{', /JSON/],
      ['{"accounts": []}', /accounts/],
      ['{"accounts": [{"id": "Frota!"}]}', /accounts\.0\.id/],
      ['{"accounts": [{"id": "a", "rateLimit": "fast"}]}', /rateLimit/],
      ['{"accounts": [{"id": "a", "apiKeyFiel": "/k"}]}', /apiKeyFiel|unrecognized/i],
      ['{"accounts": [{"id": "a"}, {"id": "a"}]}', /twice/],
    ] as const) {
      const error = configError(() => parseAccounts(text, defaults));
      expect(error.variable).toBe('VQ_ACCOUNTS_FILE');
      expect(error.message).toMatch(message);
    }
  });

  it('an account the config does not know is a typed error listing the known ones', () => {
    const c = loadConfig({});
    expect(() => accountOf(c, 'nope')).toThrow(
      expect.objectContaining({ code: 'ACCOUNT_NOT_FOUND', message: expect.stringContaining('default') }),
    );
  });
});

describe('defaults', () => {
  it('an empty environment gives the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      baseUrl: undefined,
      apiKey: undefined,
      product: 'agregados',
      redisUrl: 'redis://127.0.0.1:6379',
      allowEviction: false,
      queueName: 'vqb',
      prefix: '{vqb}',
      // auto: learned from the upstream, starting at 1/s.
      rateLimit: { max: 1, durationMs: 1_000, text: 'auto', auto: {} },
      pacingJitterMs: 25,
      interactiveMax: 100,
      concurrency: 8,
      maxInFlight: 500,
      poll: {
        initialMs: 15_000,
        intervalMs: 2_000,
        maxIntervalMs: 15_000,
        deadlineMs: 300_000,
        adaptive: true,
        quantile: 0.9,
        interactiveMs: 1_000,
      },
      attempts: 8,
      backoffMs: 1_000,
      recreateUncertain: true,
      budget: { perDay: undefined, perMonth: undefined, reuseWithinMs: 0, reuseKeepMs: 7 * 86_400_000 },
      upstreamHttp: { connectTimeoutMs: 10_000, requestTimeoutMs: 30_000 },
      http: { host: '127.0.0.1', port: 8080, bodyLimit: 10 * 1024 * 1024, maxPlates: 100_000, tokens: undefined },
      inbox: { pollMs: 1_000, stableMs: 2_000 },
      metricsPort: undefined,
      csvDelimiter: ';',
      locks: { lockDurationMs: 30_000, stalledIntervalMs: 30_000, maxStalledCount: 20 },
      outDir: 'out',
      root: 'data',
      keepFailedMs: 7 * 86_400_000,
      logLevel: 'info',
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('empty strings count as unset', () => {
    expect(loadConfig({ VQ_CONCURRENCY: '', REDIS_URL: '', VQ_API_KEY: '' })).toMatchObject({
      concurrency: 8,
      redisUrl: 'redis://127.0.0.1:6379',
      apiKey: undefined,
    });
  });

  it('reads values, durations and booleans from the environment', () => {
    const c = loadConfig({
      VQ_BASE_URL: 'https://api.example.com/v1/',
      VQ_RATE_LIMIT: '5/s',
      VQ_CONCURRENCY: '16',
      VQ_POLL_INITIAL: '2s',
      VQ_POLL_DEADLINE: '10m',
      VQ_POLL_ADAPTIVE: 'off',
      REDIS_URL: 'rediss://cache:6380/2',
    });
    expect(c.baseUrl).toBe('https://api.example.com/v1');
    expect(c.rateLimit).toEqual({ max: 5, durationMs: 1_000, text: '5/s' });
    expect(c.concurrency).toBe(16);
    expect(c.poll).toMatchObject({ initialMs: 2_000, deadlineMs: 600_000, adaptive: false });
    expect(c.redisUrl).toBe('rediss://cache:6380/2');
  });

  it('the max poll interval is never below the poll interval', () => {
    expect(loadConfig({ VQ_POLL_INTERVAL: '20s', VQ_POLL_MAX_INTERVAL: '5s' }).poll.maxIntervalMs).toBe(20_000);
  });
});

describe('malformed variables', () => {
  it.each([
    ['VQ_RATE_LIMIT', 'fast'],
    ['VQ_CONCURRENCY', '0'],
    ['VQ_CONCURRENCY', 'eight'],
    ['REDIS_URL', 'localhost'],
    ['VQ_POLL_INITIAL', 'soon'],
    ['VQ_BASE_URL', 'ftp://api.example.com'],
    ['VQ_PACING_JITTER', 'a bit'],
    ['VQ_INTERACTIVE_MAX', '100000'],
    ['VQ_POLL_ADAPTIVE', 'maybe'],
    ['LOG_LEVEL', 'loud'],
  ])('%s=%j → ConfigError naming %s', (name, value) => {
    const error = configError(() => loadConfig({ [name]: value }));
    expect(error.variable).toBe(name);
    expect(error.message.startsWith(`${name}:`)).toBe(true);
    expect(error.code).toBe('CONFIG_INVALID');
  });

  it('the message quotes the bad value and says what was expected', () => {
    const error = configError(() => loadConfig({ VQ_RATE_LIMIT: 'fast' }));
    expect(error.message).toContain('"fast"');
    expect(error.message).toContain('60/min');
    expect(configError(() => loadConfig({ VQ_POLL_INITIAL: 'soon' })).message).toMatch(/duration/);
  });

  it('a poll deadline not longer than the first poll is refused', () => {
    expect(configError(() => loadConfig({ VQ_POLL_INITIAL: '10s', VQ_POLL_DEADLINE: '10s' })).variable).toBe(
      'VQ_POLL_DEADLINE',
    );
  });
});

describe('overrides', () => {
  it('beat the environment', () => {
    const c = loadConfig(
      { VQ_CONCURRENCY: '4', VQ_RATE_LIMIT: '60/min', VQ_QUEUE: 'env-queue' },
      { VQ_CONCURRENCY: '32', VQ_RATE_LIMIT: '10/s' },
    );
    expect(c.concurrency).toBe(32);
    expect(c.rateLimit.max).toBe(10);
    expect(c.queueName).toBe('env-queue');
  });

  it('a bad override is named even when the environment value is good', () => {
    expect(configError(() => loadConfig({ VQ_CONCURRENCY: '4' }, { VQ_CONCURRENCY: '0' })).variable).toBe(
      'VQ_CONCURRENCY',
    );
  });
});

describe('the API key', () => {
  const KEY = 'sk_live_supersecret_42';

  it('VQ_API_KEY and VQ_API_KEY_FILE together are refused', () => {
    const error = configError(() => loadConfig({ VQ_API_KEY: KEY, VQ_API_KEY_FILE: '/run/secrets/key' }));
    expect(error.message).toMatch(/VQ_API_KEY\b/);
    expect(error.message).toContain('VQ_API_KEY_FILE');
    expect(error.message).not.toContain(KEY);
  });

  it('an inline key is held in a Secret; a file is named by path', () => {
    const inline = loadConfig({ VQ_API_KEY: KEY }).apiKey;
    expect(inline?.kind).toBe('inline');
    expect(inline?.kind === 'inline' && inline.secret.reveal()).toBe(KEY);
    expect(loadConfig({ VQ_API_KEY_FILE: '/run/secrets/key' }).apiKey).toEqual({
      kind: 'file',
      path: '/run/secrets/key',
    });
  });

  it('never appears in JSON.stringify, util.inspect or string conversion of the config', () => {
    const c: Config = loadConfig({ VQ_API_KEY: KEY, VQ_BASE_URL: 'https://api.example.com' });
    const json = JSON.stringify(c);
    expect(json).not.toContain(KEY);
    expect(json).toContain('[redacted]');
    expect(inspect(c, { depth: Infinity, showHidden: true })).not.toContain(KEY);
    expect(inspect(c.apiKey, { depth: Infinity })).toContain('redacted');
    expect(`${c.apiKey?.kind === 'inline' ? c.apiKey.secret : ''}`).toBe('[redacted]');
    expect(String(new Secret(KEY))).not.toContain(KEY);
  });
});

describe('parseRateLimit', () => {
  it.each([
    ['60/min', 60, 60_000],
    ['5/s', 5, 1_000],
    ['300/m', 300, 60_000],
    ['10/2s', 10, 2_000],
    ['1000/day', 1_000, 86_400_000],
    ['100/hour', 100, 3_600_000],
    [' 7 / 500ms ', 7, 500],
    ['3/MIN', 3, 60_000],
  ])('%j → %d per %d ms', (text, max, durationMs) => {
    expect(parseRateLimit(text)).toEqual({ max, durationMs, text: text.trim() });
  });

  it.each(['fast', '60', '60/', '/min', '0/min', '60/0s', '60/fortnight', '1.5/s', '-1/s', ''])(
    '%j is not a rate',
    (text) => {
      expect(parseRateLimit(text)).toBeUndefined();
    },
  );
});

describe('parseDuration', () => {
  it.each([
    ['90', 90],
    ['500ms', 500],
    ['90s', 90_000],
    ['1.5s', 1_500],
    ['5m', 300_000],
    ['24h', 86_400_000],
    ['7d', 604_800_000],
    [' 30 s ', 30_000],
    ['2H', 7_200_000],
  ])('%j → %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['soon', '', '-5s', '5 minutes', '5w', 's'])('%j is not a duration', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});

describe('requireAccountUpstream', () => {
  it('names VQ_BASE_URL when it is missing', () => {
    const error = configError(() => requireAccountUpstream(loadConfig({ VQ_API_KEY: 'k' }).accounts[0]!));
    expect(error.variable).toBe('VQ_BASE_URL');
  });

  it('names VQ_API_KEY (and mentions the file option) when no key is set', () => {
    const error = configError(() =>
      requireAccountUpstream(loadConfig({ VQ_BASE_URL: 'https://api.example.com' }).accounts[0]!),
    );
    expect(error.variable).toBe('VQ_API_KEY');
    expect(error.message).toContain('VQ_API_KEY_FILE');
  });

  it('returns both when set', () => {
    const up = requireAccountUpstream(
      loadConfig({ VQ_BASE_URL: 'https://api.example.com/', VQ_API_KEY_FILE: '/k' }).accounts[0]!,
    );
    expect(up).toEqual({ baseUrl: 'https://api.example.com', apiKey: { kind: 'file', path: '/k' } });
  });

  it('names the account and VQ_ACCOUNTS_FILE for an account of the file without a key', () => {
    const [account] = parseAccounts('{"accounts": [{"id": "frota"}]}', {
      baseUrl: 'https://api.example.com',
      product: 'agregados',
      rateLimit: parseRateLimit('60/min')!,
    });
    const error = configError(() => requireAccountUpstream(account!));
    expect(error.variable).toBe('VQ_ACCOUNTS_FILE');
    expect(error.message).toContain('frota');
  });
});

describe('the exports’ layout and language (VQ_EXPORT_LAYOUT, VQ_LANG)', () => {
  it('is readable and pt-BR by default, also under a locale that names no language (C.UTF-8)', () => {
    expect(loadConfig({})).toMatchObject({ exportLayout: 'readable', lang: 'pt-BR' });
    expect(loadConfig({ LANG: 'C.UTF-8' }).lang).toBe('pt-BR');
  });

  it('follows the locale when VQ_LANG is unset (LC_ALL first), and VQ_LANG over it', () => {
    expect(loadConfig({ LANG: 'en_US.UTF-8' }).lang).toBe('en');
    expect(loadConfig({ LANG: 'en_US.UTF-8', LC_ALL: 'pt_BR.UTF-8' }).lang).toBe('pt-BR');
    expect(loadConfig({ LANG: 'en_US.UTF-8', VQ_LANG: 'pt-BR' }).lang).toBe('pt-BR');
    expect(loadConfig({ LANG: 'pt_BR.UTF-8', VQ_LANG: 'en' }).lang).toBe('en');
  });

  it('takes VQ_EXPORT_LAYOUT=raw, and refuses a layout or a language it does not know', () => {
    expect(loadConfig({ VQ_EXPORT_LAYOUT: 'raw' }).exportLayout).toBe('raw');
    expect(configError(() => loadConfig({ VQ_EXPORT_LAYOUT: 'pretty' })).message).toContain('VQ_EXPORT_LAYOUT');
    expect(configError(() => loadConfig({ VQ_LANG: 'fr' })).message).toMatch(/VQ_LANG.*pt-BR or en/);
  });
});
