// `vqb` commands. Thin: parse flags, build the Config once, call the modules that do the work, and
// turn typed errors into one readable line and an exit code (2 for usage/config, 1 otherwise).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { DestinationStream } from 'pino';
import type { CliIo, CommandContext, OptionSpec } from './commands/command.js';
import type { CommandEntry } from './commands/index.js';
import { type Config, loadConfig, type Overrides, SETTINGS, type SettingName } from './config.js';
import { errorCodeEntry } from './error-codes.js';
import { isVqbError, UsageError, VqbError } from './errors.js';
import { createLogger } from './logger.js';
import { printable } from './upstream/bounds.js';

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

function helpText(commands: Record<string, CommandEntry>): string {
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
function parseErrorText(err: Error, name: string, options: OptionSpec): string {
  const ambiguous = /^Option '(--[\w-]+)' argument is ambiguous/.exec(err.message);
  if (ambiguous) return `${ambiguous[1]} needs a value; a value starting with "-" is written ${ambiguous[1]}=-VALUE`;
  // Node's own words for an unknown flag talk about positionals and '--': say what was meant.
  const unknown = /^Unknown option '(-{1,2}[^']*)'/.exec(err.message);
  if (unknown) {
    const flag = unknown[1]!;
    const near = nearest(flag.replace(/^-+/, '').replace(/=.*$/, ''), Object.keys(options));
    return `unknown option ${flag} for \`vqb ${name}\`${near ? `; did you mean --${near}?` : ''}`;
  }
  return err.message.split('\n')[0] ?? String(err);
}

/** The known name closest to `typed` (edit distance, or a prefix), when one is close enough to be meant. */
export function nearest(typed: string, known: readonly string[]): string | undefined {
  let best: { name: string; d: number } | undefined;
  for (const name of known) {
    const d = name.startsWith(typed) && typed.length >= 2 ? 1 : distance(typed, name);
    if (best === undefined || d < best.d) best = { name, d };
  }
  return best && best.d <= Math.max(1, Math.floor(typed.length / 3)) ? best.name : undefined;
}

function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

function defaultIo(): CliIo {
  ignoreClosedReader(process.stdout);
  ignoreClosedReader(process.stderr);
  // Both signals stay handled for the whole run: a second Ctrl-C reaches a command that asked for
  // it (`vqb run` then stops without waiting and still says how to resume); for any other command
  // it ends the process at once, as Node's default would.
  let stops = 0;
  let forceWanted = false;
  let first: (signal: string) => void = () => {};
  let second: (signal: string) => void = () => {};
  const stopSignal = new Promise<string>((resolve) => (first = resolve));
  const forceSignal = new Promise<string>((resolve) => (second = resolve));
  const onSignal = (signal: string) => {
    if (++stops === 1) first(signal);
    else if (forceWanted) second(signal);
    else process.exit(130);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    env: process.env,
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    stopSignal,
    get forceSignal() {
      forceWanted = true;
      return forceSignal;
    },
  };
}

/** Flags given before the command (`vqb --redis-url X status`): the settings every command takes. */
function leadingFlags(argv: string[]): { name: string | undefined; rest: string[] } {
  const before: string[] = [];
  let i = 0;
  while (i < argv.length) {
    const arg = argv[i] as string;
    const flag = /^--([\w-]+)(=.*)?$/.exec(arg);
    if (!flag || !(flag[1] === 'set' || Object.hasOwn(COMMON, flag[1] as string))) break;
    const takesNext = flag[2] === undefined && i + 1 < argv.length;
    before.push(...argv.slice(i, takesNext ? i + 2 : i + 1));
    i += takesNext ? 2 : 1;
  }
  return { name: argv[i], rest: [...argv.slice(i + 1), ...before] };
}

/** The package's version: package.json sits two folders above dist/src/cli.js (one above src/cli.ts). */
function version(): string {
  for (const path of ['../../package.json', '../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'vqb' && pkg.version) return pkg.version;
    } catch {
      // not this folder
    }
  }
  return 'unknown';
}

/** A port another process holds (`vqb serve` twice, a busy --metrics-port): one line, fix the command. */
function portInUse(err: unknown): VqbError | undefined {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e?.code !== 'EADDRINUSE') return undefined;
  const where = e.port !== undefined ? `${e.address ?? ''}:${e.port}` : (e.message.split(' ').at(-1) ?? '');
  return new VqbError(
    'PORT_IN_USE',
    `cannot listen on ${where}: the port is in use (another vqb, or another program); choose another port`,
  );
}

export async function main(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  const { name, rest } = leadingFlags(argv);
  if (name === '--version' || name === '-v' || name === 'version') {
    io.stdout.write(`vqb ${version()}\n`);
    return 0;
  }
  const { COMMANDS } = await import('./commands/index.js');
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(`${helpText(COMMANDS)}\n`);
    return name ? 0 : 2;
  }
  const command = Object.hasOwn(COMMANDS, name) ? await COMMANDS[name]!.load() : undefined;
  // Lines may quote the upstream (a pause message, a state, `vqb check`'s answers): its control
  // characters are shown, never obeyed by the terminal.
  const print = (line = ''): void => void io.stdout.write(`${printable(line)}\n`);
  try {
    if (!command) {
      const near = nearest(name, Object.keys(COMMANDS));
      const guess = near ? `; did you mean \`vqb ${near}\`?` : '';
      throw new UsageError(`unknown command "${name}"${guess} (\`vqb --help\` lists them)`);
    }
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
        const options = { ...COMMON_OPTIONS, ...command.options };
        throw new UsageError(`${parseErrorText(err as Error, name, options)} (see \`vqb ${name} --help\`)`);
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
      // A process's logs go to fd 2 itself (pino's own destination); `main` run with other streams
      // (a test, an embedding program) gets them on its stderr.
      logger: (c) =>
        createLogger(
          { level: c.logLevel },
          io.stderr === process.stderr ? undefined : (io.stderr as DestinationStream),
        ),
      io,
      print,
    };
    if (command.handlesStop) return await command.run(ctx);
    // A command that does not listen for a stop ends at the first one (an export stuck on a file
    // system that never answers, a read waiting on Redis): said in one line, exit 130.
    const stopped = io.stopSignal.then((signal) => ({ signal }));
    const result = await Promise.race([command.run(ctx), stopped]);
    if (typeof result === 'number') return result;
    io.stderr.write(`vqb: stopped (${result.signal}) before \`vqb ${name}\` finished\n`);
    return 130;
  } catch (thrown) {
    const err = portInUse(thrown) ?? thrown;
    if (isVqbError(err)) {
      io.stderr.write(`vqb: ${printable(err.message)}\n`);
      return errorCodeEntry(err.code)?.exit ?? 1;
    }
    io.stderr.write(`vqb: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
    return 1;
  }
}
