// Running `vqb` as a user does, in child processes, against a harness's Redis prefix and simulator.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { main } from '../../src/cli.js';
import type { Harness } from './engine.js';

export const BIN = resolve(import.meta.dirname, '../../bin/vqb.js');
/** `node --import` it: the program writes every module it resolved on exit (record-loads.mjs). */
const RECORD_LOADS = resolve(import.meta.dirname, 'record-loads.mjs');

/**
 * The URL of every module `vqb <args>` resolved, ESM and CommonJS, in a process of its own (what a
 * start loads is a fresh process's: the test's own has everything loaded already). `env` is the
 * child's whole environment besides PATH. Its exit code is not looked at (`vqb` alone exits 2).
 */
export async function modulesLoadedBy(args: string[], env: Record<string, string> = {}): Promise<string[]> {
  const file = join(await mkdtemp(join(tmpdir(), 'vqb-loads-')), 'loads.json');
  try {
    await promisify(execFile)(process.execPath, ['--import', RECORD_LOADS, BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', VQB_LOADS_FILE: file, ...env },
    }).catch(() => undefined);
    return JSON.parse(await readFile(file, 'utf8')) as string[];
  } finally {
    await rm(dirname(file), { recursive: true, force: true });
  }
}

export interface Finished {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface VqbProcess {
  child: ChildProcess;
  done: Promise<Finished>;
}

/** The settings every child needs to share the harness's queue, simulator and key, scaled down for tests. */
export function harnessEnv(h: Harness, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    REDIS_URL: h.config.redisUrl,
    VQ_PREFIX: h.config.prefix,
    VQ_BASE_URL: h.sim.url,
    VQ_API_KEY_FILE: h.keyFile,
    ...(h.accountsFile ? { VQ_ACCOUNTS_FILE: h.accountsFile } : {}),
    VQ_OUT_DIR: h.config.outDir,
    VQ_RATE_LIMIT: '100/s',
    VQ_POLL_INITIAL: '300ms',
    VQ_POLL_INTERVAL: '150ms',
    VQ_LOCK_DURATION: '2s',
    VQ_STALLED_INTERVAL: '1s',
    LOG_LEVEL: 'warn',
    // As testConfig: the raw layout, in English (the readable one is tested on its own).
    VQ_EXPORT_LAYOUT: 'raw',
    VQ_LANG: 'en',
    ...extra,
  };
}

/** `node bin/vqb.js <args>` with exactly `env`; killed after `timeoutMs` if it has not exited. */
export function spawnVqb(args: string[], env: Record<string, string>, timeoutMs = 120_000): VqbProcess {
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const started = Date.now();
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const done = once(child, 'exit').then(([code, signal]) => {
    clearTimeout(timer);
    return { code: code as number | null, signal: signal as string | null, stdout, stderr, ms: Date.now() - started };
  });
  return { child, done };
}

export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

export async function waitFor(check: () => Promise<boolean>, timeoutMs = 20_000, label = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${label} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Waits until a spawned server answers `GET {base}/healthz`. A process that exits first fails at
 * once with what it printed; one that is only slow (a busy CI machine: a start with OpenTelemetry
 * took over 15 s beside an apt install) gets `timeoutMs`, a bound against a hang, not a timing.
 */
export async function answering(base: string, proc: VqbProcess, timeoutMs = 30_000): Promise<void> {
  await waitFor(
    async () => {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
        const { code, signal, stderr } = await proc.done;
        throw new Error(`${base}: the process exited (${code ?? signal}) before answering:\n${stderr.slice(-2_000)}`);
      }
      try {
        return (await fetch(`${base}/healthz`)).ok;
      } catch {
        return false;
      }
    },
    timeoutMs,
    `${base}/healthz answering`,
  );
}

/** The error a call fails with; a call that succeeds fails the test. */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the call to fail');
}

/** Samples `read` every `intervalMs` until stopped; resolves to the largest value seen. */
export function sampleMax(read: () => Promise<number>, intervalMs: number): { stop(): Promise<number> } {
  let max = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      max = Math.max(max, await read());
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return max;
    },
  };
}

/** `vqb <args>` in this process (`main(argv, io)`), with the harness's settings as environment. */
export async function cli(
  h: Harness,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { code, stdout, stderr } = await runVqb(args, {
    REDIS_URL: h.config.redisUrl,
    VQ_PREFIX: h.config.prefix,
    VQ_BASE_URL: h.sim.url,
    VQ_API_KEY_FILE: h.keyFile,
    VQ_OUT_DIR: h.config.outDir,
    VQ_ARCHIVE_DIR: h.config.retention.archiveDir,
    LOG_LEVEL: 'silent',
    // As harnessEnv: the raw layout in English (the HTTP downloads' and the archive's), which
    // tests about other things compare against.
    VQ_EXPORT_LAYOUT: 'raw',
    VQ_LANG: 'en',
    ...env,
  });
  return { code: code ?? 1, stdout, stderr };
}

/**
 * `node <file> <args>` as an application would run it against `h`'s Redis, simulator and key
 * (`env` adds to that), from the repository's root: its exit code and what it printed.
 */
export async function runNodeProgram(
  h: Harness,
  file: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<{ exit: number; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [file, ...args], {
    cwd: resolve(import.meta.dirname, '../..'),
    env: {
      PATH: process.env.PATH,
      REDIS_URL: h.config.redisUrl,
      VQ_PREFIX: h.config.prefix,
      VQ_BASE_URL: h.sim.url,
      VQ_API_KEY_FILE: h.keyFile,
      VQ_POLL_INITIAL: '300ms',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [exit] = (await once(child, 'exit')) as [number];
  return { exit, stdout, stderr };
}

/**
 * `vqb <args>` in this process (`main(argv, io)`) with exactly `env`, as spawnVqb takes it
 * (harnessEnv's settings): what a spawned `vqb` would print and exit with, its logs on its stderr,
 * for ~1 s less CPU than a child (Node's start and vqb's imports). Its stdin is no terminal, as a
 * child's with stdin ignored. Keep spawnVqb where the test is about the process: signals, a
 * second process, an exit Node itself decides.
 */
export async function runVqb(args: string[], env: Record<string, string>): Promise<Finished> {
  return startVqb(args, env).done;
}

/** A `vqb` command running in this process (startVqb): what it printed so far, and its stop. */
export interface InProcessVqb {
  done: Promise<Finished>;
  /** What it printed so far. */
  output(): { stdout: string; stderr: string };
  /** Asks it to stop as SIGINT/SIGTERM would (`io.stopSignal`), and waits for its exit. */
  stop(signal?: string): Promise<Finished>;
}

/**
 * `vqb <args>` in this process, running until it ends or is stopped: for a command that runs
 * until signalled (`vqb work`, `vqb serve`) where the test is about what it does, not about the
 * process (spawnVqb for that).
 */
export function startVqb(args: string[], env: Record<string, string>): InProcessVqb {
  const stdin = new PassThrough();
  stdin.end();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  let stop: (signal: string) => void = () => {};
  const stopSignal = new Promise<string>((r) => (stop = r));
  const started = Date.now();
  const done = main(args, { env, stdin, stdout, stderr, stopSignal }).then(async (code) => {
    // pino's writes reach the stream on a later tick; let them land before reading.
    await new Promise((r) => setImmediate(r));
    return { code, signal: null, stdout: out, stderr: err, ms: Date.now() - started };
  });
  return {
    done,
    output: () => ({ stdout: out, stderr: err }),
    stop(signal = 'SIGTERM') {
      stop(signal);
      return done;
    },
  };
}
