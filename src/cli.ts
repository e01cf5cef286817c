// `vqb` commands. Thin: parse flags, build the Config once, call the modules that do the work, and
// turn typed errors into one readable line and an exit code (2 for usage/config, 1 otherwise).
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { type Config, loadConfig, type Overrides, SETTINGS, type SettingName } from './config.js';
import { errorCodeEntry } from './error-codes.js';
import { isVqbError, UsageError } from './errors.js';
import { createLogger, type Logger } from './logger.js';

export interface CliIo {
  env: Record<string, string | undefined>;
  stdout: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stderr: NodeJS.WritableStream;
  /** Resolves when the user asks to stop (SIGINT/SIGTERM); commands that run until stopped await it. */
  stopSignal: Promise<string>;
}

export interface CommandContext {
  args: string[];
  flags: Record<string, string | boolean | string[] | undefined>;
  config: () => Config;
  /** The Config with some settings forced (flags still win over the environment). */
  configWith: (forced: Overrides) => Config;
  logger: (config: Config) => Logger;
  io: CliIo;
  print(line?: string): void;
}

type OptionSpec = NonNullable<ParseArgsConfig['options']>;

export interface Command {
  summary: string;
  usage: string;
  options?: OptionSpec;
  /** Passes argv through untouched (the simulator parses its own flags). */
  rawArgs?: boolean;
  run(ctx: CommandContext): Promise<number>;
}

/** Flags every command accepts; each sets the environment variable of the same meaning. */
const COMMON: Record<string, { setting: SettingName; short?: string }> = {
  'redis-url': { setting: 'REDIS_URL' },
  queue: { setting: 'VQ_QUEUE' },
  prefix: { setting: 'VQ_PREFIX' },
  'base-url': { setting: 'VQ_BASE_URL' },
  'api-key-file': { setting: 'VQ_API_KEY_FILE' },
  'rate-limit': { setting: 'VQ_RATE_LIMIT' },
  'pacing-jitter': { setting: 'VQ_PACING_JITTER' },
  accounts: { setting: 'VQ_ACCOUNTS_FILE' },
  concurrency: { setting: 'VQ_CONCURRENCY' },
  'max-in-flight': { setting: 'VQ_MAX_IN_FLIGHT' },
  out: { setting: 'VQ_OUT_DIR' },
  root: { setting: 'VQ_ROOT' },
  'log-level': { setting: 'LOG_LEVEL' },
};

const COMMON_OPTIONS: OptionSpec = {
  ...Object.fromEntries(Object.keys(COMMON).map((name) => [name, { type: 'string' as const }])),
  set: { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
};

const COMMON_USAGE = `Settings (any command): ${Object.keys(COMMON)
  .map((f) => `--${f}`)
  .join(' ')}
  --set NAME=VALUE for any other setting (see README); flags override environment variables.`;

function overridesFrom(flags: CommandContext['flags']): Overrides {
  const overrides: Overrides = {};
  for (const [flag, { setting }] of Object.entries(COMMON)) {
    const value = flags[flag];
    if (typeof value === 'string') overrides[setting] = value;
  }
  for (const pair of (flags.set as string[] | undefined) ?? []) {
    const eq = pair.indexOf('=');
    const name = pair.slice(0, eq);
    if (eq < 1 || !(name in SETTINGS))
      throw new UsageError(`--set expects NAME=VALUE with a known setting name; got ${JSON.stringify(pair)}`);
    overrides[name as SettingName] = pair.slice(eq + 1);
  }
  return overrides;
}

async function loadCommands(): Promise<Record<string, Command>> {
  const { COMMANDS } = await import('./commands/index.js');
  return COMMANDS;
}

function helpText(commands: Record<string, Command>): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  return [
    'vqb — bulk vehicle look-ups (consultas veiculares) paced under the upstream limits',
    '',
    'Usage: vqb <command> [options]',
    '',
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    '',
    "Run `vqb <command> --help` for a command's options.",
    COMMON_USAGE,
  ].join('\n');
}

/**
 * `vqb status | head -4`: the reader goes away and the next write fails with EPIPE. That is the
 * reader's choice, not an error of ours: the rest of the output is dropped and the command ends
 * normally (a run's workers still finish what they hold). Any other stream error is reported.
 */
export function ignoreClosedReader(stream: NodeJS.WritableStream): void {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE' || err.code === 'ERR_STREAM_DESTROYED') return;
    process.stderr.write(`vqb: cannot write output: ${err.message}\n`);
  });
}

/**
 * node:util's parseArgs words, made plain. "--days -3" reads -3 as a flag of its own ("argument
 * is ambiguous"); say how to give a value that starts with a dash.
 */
function parseErrorText(err: Error): string {
  const ambiguous = /^Option '(--[\w-]+)' argument is ambiguous/.exec(err.message);
  if (ambiguous) return `${ambiguous[1]} needs a value; a value starting with "-" is written ${ambiguous[1]}=-VALUE`;
  return err.message.split('\n')[0] ?? String(err);
}

function defaultIo(): CliIo {
  ignoreClosedReader(process.stdout);
  ignoreClosedReader(process.stderr);
  return {
    env: process.env,
    stdout: process.stdout,
    stderr: process.stderr,
    stopSignal: new Promise((resolve) => {
      process.once('SIGINT', () => resolve('SIGINT'));
      process.once('SIGTERM', () => resolve('SIGTERM'));
    }),
  };
}

export async function main(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  const commands = await loadCommands();
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(`${helpText(commands)}\n`);
    return name ? 0 : 2;
  }
  const command = commands[name];
  const print = (line = ''): void => void io.stdout.write(`${line}\n`);
  try {
    if (!command) throw new UsageError(`unknown command "${name}"; run \`vqb --help\``);
    if (command.rawArgs && rest.includes('--help')) {
      print(command.usage);
      return 0;
    }
    let parsed: { values: CommandContext['flags']; positionals: string[] } = { values: {}, positionals: rest };
    if (!command.rawArgs) {
      try {
        parsed = parseArgs({
          args: rest,
          options: { ...COMMON_OPTIONS, ...command.options },
          allowPositionals: true,
          strict: true,
        }) as typeof parsed;
      } catch (err) {
        throw new UsageError(`${parseErrorText(err as Error)} (see \`vqb ${name} --help\`)`);
      }
      if (parsed.values.help) {
        print(`${command.usage}\n\n${COMMON_USAGE}`);
        return 0;
      }
    }
    let config: Config | undefined;
    const ctx: CommandContext = {
      args: parsed.positionals,
      flags: parsed.values,
      config: () => (config ??= loadConfig(io.env, overridesFrom(parsed.values))),
      configWith: (forced) => loadConfig(io.env, { ...forced, ...overridesFrom(parsed.values) }),
      logger: (c) => createLogger({ level: c.logLevel }),
      io,
      print,
    };
    return await command.run(ctx);
  } catch (err) {
    if (isVqbError(err)) {
      io.stderr.write(`vqb: ${err.message}\n`);
      return errorCodeEntry(err.code)?.exit ?? 1;
    }
    io.stderr.write(`vqb: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
    return 1;
  }
}
