// The processes a benchmark step runs beside the orchestrator, each on its own event loop so none
// steals time from the one being measured: the upstream simulator (`vqb simulate`), our workers
// (`vqb work`, configured by environment as in production) and the naive peer (bench/peer.js).
import { type ChildProcess, execFileSync, fork, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { SimulatorOptions, SimulatorStats } from '../src/simulator/index.js';

export const VQB_BIN = fileURLToPath(new URL('../../bin/vqb.js', import.meta.url));

/** Every child still running, so a failed run can stop them (each by its own pid). */
const live = new Set<ChildProcess>();

export async function stopChild(child: ChildProcess, graceMs = 35_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    live.delete(child);
    return;
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  live.delete(child);
}

export async function stopAllChildren(): Promise<void> {
  await Promise.allSettled([...live].map((c) => stopChild(c, 5_000)));
}

/** Resolves with the first stdout/stderr line matching `pattern`; rejects if the child exits first. */
function waitForLine(
  child: ChildProcess,
  stream: 'stdout' | 'stderr',
  pattern: RegExp,
  timeoutMs: number,
  tail: string[],
): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    const source = child[stream];
    if (!source) return reject(new Error(`child has no ${stream}`));
    const timer = setTimeout(
      () => finish(new Error(`no line matching ${pattern} within ${timeoutMs} ms:\n${tail.join('\n')}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      let nl: number;
      while ((nl = buffer.indexOf('\n')) !== -1) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        const match = pattern.exec(line);
        if (match) return finish(undefined, match);
      }
    };
    const onExit = (code: number | null) =>
      finish(new Error(`child exited (${code}) before printing ${pattern}:\n${tail.join('\n')}`));
    function finish(err?: Error, match?: RegExpExecArray) {
      clearTimeout(timer);
      source!.off('data', onData);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(match!);
    }
    source.on('data', onData);
    child.once('exit', onExit);
  });
}

const LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** Keeps the last lines a child wrote, for error messages, and counts pino log lines by message. */
function collectLines(
  child: ChildProcess,
  stream: 'stdout' | 'stderr',
  tail: string[],
  messages?: Map<string, number>,
): void {
  let buffer = '';
  child[stream]?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    let nl: number;
    while ((nl = buffer.indexOf('\n')) !== -1) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      tail.push(line);
      if (tail.length > 30) tail.shift();
      if (messages) {
        const level = /"level":(\d+)/.exec(line)?.[1];
        const msg = /"msg":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1];
        if (level && msg !== undefined) {
          // Numbers vary per line ("hold for 998 ms"): count by the message's shape.
          const key = `${LEVELS[Number(level)] ?? level}: ${msg.replace(/\d+/g, 'N')}`;
          messages.set(key, (messages.get(key) ?? 0) + 1);
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The simulator

export interface SimChild {
  url: string;
  pid: number;
  /** `times`: with every counted request's arrival per key (`timesByKey`); `plates`: creates by plate. */
  stats(options?: { times?: boolean; plates?: boolean }): Promise<SimulatorStats>;
  /** Clears stats and limiter state (queries stay). */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export async function startSimChild(flags: string[]): Promise<SimChild> {
  const child = spawn(process.execPath, [VQB_BIN, 'simulate', '--port', '0', ...flags], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  const tail: string[] = [];
  collectLines(child, 'stderr', tail);
  const match = await waitForLine(child, 'stdout', /listening on (http:\/\/\S+)/, 15_000, tail);
  child.stdout?.resume();
  const url = match[1]!;
  const call = async (method: 'GET' | 'POST', path: string): Promise<unknown> => {
    const res = await request(`${url}${path}`, { method });
    const body = await res.body.json();
    if (res.statusCode >= 300)
      throw new Error(`simulator ${method} ${path}: ${res.statusCode} ${JSON.stringify(body)}`);
    return body;
  };
  return {
    url,
    pid: child.pid!,
    stats: async (options = {}) => {
      const query = [options.times ? 'times=1' : '', options.plates ? 'plates=1' : ''].filter(Boolean).join('&');
      return (await call('GET', query ? `/__stats?${query}` : '/__stats')) as SimulatorStats;
    },
    reset: async () => void (await call('POST', '/__admin/reset')),
    stop: () => stopChild(child, 5_000),
  };
}

/**
 * A simulator configured by a `--config` file (keys with their own labels and rate limits, which
 * flags cannot express); the file lives in a temp directory removed when the simulator stops.
 */
export async function startSimChildWithConfig(options: Partial<SimulatorOptions>): Promise<SimChild> {
  const dir = await mkdtemp(join(tmpdir(), 'vqb-bench-sim-'));
  const path = join(dir, 'simulator.json');
  await writeFile(path, JSON.stringify(options));
  try {
    const sim = await startSimChild(['--config', path]);
    return {
      ...sim,
      stop: async () => {
        await sim.stop();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Our workers: `vqb work`

export interface WorkerChild {
  pid: number;
  /** User + system CPU seconds the process has used so far (from /proc, or `ps` elsewhere). */
  cpuSeconds(): number;
  /** Log lines by level and message (numbers replaced by N), e.g. "info: upstream budget used up: …". */
  messages: Map<string, number>;
  tail: string[];
  stop(): Promise<void>;
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

export function processCpuSeconds(pid: number): number {
  try {
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15 (1-based, whole line).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
  } catch {
    const text = execFileSync('ps', ['-o', 'time=', '-p', String(pid)], { encoding: 'utf8' }).trim();
    return text
      .split(/[-:]/)
      .map(Number)
      .reduce((acc, part) => acc * 60 + part, 0);
  }
}

export async function startWorkerChild(env: Record<string, string>): Promise<WorkerChild> {
  const child = spawn(process.execPath, [VQB_BIN, 'work'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  live.add(child);
  const tail: string[] = [];
  const messages = new Map<string, number>();
  collectLines(child, 'stdout', tail);
  const started = waitForLine(child, 'stderr', /"msg":"worker started"/, 15_000, tail);
  collectLines(child, 'stderr', tail, messages);
  await started;
  return {
    pid: child.pid!,
    cpuSeconds: () => processCpuSeconds(child.pid!),
    messages,
    tail,
    stop: () => stopChild(child),
  };
}

// ---------------------------------------------------------------------------------------------
// Children speaking JSON over IPC: the peer and the ingest runner

export interface IpcChild<Msg> {
  child: ChildProcess;
  /** Sends `message` and resolves with the next reply whose `type` is `replyType`. */
  ask<T extends Msg>(message: unknown, replyType: string): Promise<T>;
  /** The next message of this type, whenever it comes. */
  next<T extends Msg>(type: string): Promise<T>;
  stop(): Promise<void>;
}

export function forkIpc<Msg extends { type: string }>(modulePath: string, args: string[] = []): IpcChild<Msg> {
  const child = fork(modulePath, args, { serialization: 'json', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  live.add(child);
  const next = <T extends Msg>(type: string): Promise<T> =>
    new Promise((resolve, reject) => {
      const onMessage = (msg: Msg) => {
        if (msg.type === 'error')
          finish(new Error(`child ${modulePath}: ${(msg as unknown as { message: string }).message}`));
        else if (msg.type === type) finish(undefined, msg as T);
      };
      const onExit = (code: number | null) =>
        finish(new Error(`child ${modulePath} exited (${code}) while waiting for "${type}"`));
      function finish(err?: Error, msg?: T) {
        child.off('message', onMessage);
        child.off('exit', onExit);
        if (err) reject(err);
        else resolve(msg!);
      }
      child.on('message', onMessage);
      child.once('exit', onExit);
    });
  return {
    child,
    next,
    ask: <T extends Msg>(message: unknown, replyType: string) => {
      const reply = next<T>(replyType);
      child.send(message as object);
      return reply;
    },
    stop: () => stopChild(child, 5_000),
  };
}
