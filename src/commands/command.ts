// What a `vqb` command is and what it is handed: its arguments, its flags, the Config (built once
// by src/cli.ts) and the terminal. The commands and the CLI that runs them share these shapes.
import type { ParseArgsConfig } from 'node:util';
import type { Config, Overrides } from '../config.js';
import type { Logger } from '../logger.js';

export interface CliIo {
  env: Record<string, string | undefined>;
  /**
   * Where a question is answered (`vqb check --create`, `vqb run`'s confirmation): a terminal
   * (isTTY) when a person is there.
   */
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stderr: NodeJS.WritableStream;
  /** Resolves when the user asks to stop (SIGINT/SIGTERM); commands that run until stopped await it. */
  stopSignal: Promise<string>;
  /**
   * Resolves at a second SIGINT/SIGTERM: stop now, without waiting for running requests (absent:
   * never). Reading it is asking for it; otherwise a second signal ends the process at once.
   */
  readonly forceSignal?: Promise<string>;
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

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

export interface Command {
  usage: string;
  options?: OptionSpec;
  /** Passes argv through untouched (the simulator parses its own flags). */
  rawArgs?: boolean;
  /** The command answers SIGINT/SIGTERM itself (io.stopSignal); any other command ends at the first one. */
  handlesStop?: boolean;
  run(ctx: CommandContext): Promise<number>;
}
