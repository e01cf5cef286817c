// `vqb` child processes for tests that need real processes (SIGKILL, separate event loops): every
// byte a child writes on stdout and stderr is kept, so a test can assert what a user saw and that
// the API key appeared in none of it.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

export const BIN = resolve(import.meta.dirname, '../../bin/vqb.js');

export interface ProcOutput {
  name: string;
  args: string[];
  pid: number | undefined;
  stdout: string;
  stderr: string;
  code?: number | null;
  signal?: NodeJS.Signals | null;
}

export interface VqbProcess {
  child: ChildProcess;
  output: ProcOutput;
  /** True once the test has asked it to stop (kill); an exit without it is unexpected. */
  stopping: boolean;
  exited: Promise<ProcOutput>;
}

/** Every process a test started, with what it wrote. */
export class ProcessLog {
  readonly outputs: ProcOutput[] = [];
  readonly running = new Set<VqbProcess>();
  /** Processes that exited while nobody asked them to. */
  readonly unexpectedExits: ProcOutput[] = [];

  spawn(name: string, args: string[], env: Record<string, string>): VqbProcess {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const output: ProcOutput = { name, args, pid: child.pid, stdout: '', stderr: '' };
    this.outputs.push(output);
    child.stdout!.on('data', (c: Buffer) => (output.stdout += c.toString('utf8')));
    child.stderr!.on('data', (c: Buffer) => (output.stderr += c.toString('utf8')));
    const proc: VqbProcess = {
      child,
      output,
      stopping: false,
      exited: once(child, 'close').then(([code, signal]) => {
        output.code = code as number | null;
        output.signal = signal as NodeJS.Signals | null;
        this.running.delete(proc);
        if (!proc.stopping) this.unexpectedExits.push(output);
        return output;
      }),
    };
    this.running.add(proc);
    return proc;
  }

  /** Runs a command to its end (killed after timeoutMs) and returns what it printed. */
  async run(name: string, args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<ProcOutput> {
    const proc = this.spawn(name, args, env);
    proc.stopping = true; // it is expected to exit by itself
    const timer = setTimeout(() => proc.child.kill('SIGKILL'), timeoutMs);
    try {
      return await proc.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  async kill(proc: VqbProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<ProcOutput> {
    proc.stopping = true;
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill(signal);
    return proc.exited;
  }

  async killAll(): Promise<void> {
    await Promise.all([...this.running].map((p) => this.kill(p, 'SIGKILL')));
  }

  /** Writes what each process wrote to `<dir>/<n>-<name>.log`, for reading a failed run afterwards. */
  async saveTo(dir: string): Promise<void> {
    await mkdir(dir, { recursive: true });
    await Promise.all(
      this.outputs.map((o, i) =>
        writeFile(
          join(dir, `${String(i).padStart(3, '0')}-${o.name.replace(/[^\w.-]+/g, '_')}.log`),
          `# ${o.args.join(' ')} (pid ${o.pid}, exit ${o.code ?? o.signal})\n${o.stdout}\n--- stderr\n${o.stderr}`,
        ),
      ),
    );
  }

  /** Everything every process wrote, for leak checks. */
  text(): string {
    return this.outputs.map((o) => `${o.stdout}\n${o.stderr}`).join('\n');
  }
}

/**
 * The environment of the `vqb work` processes a long suite (chaos, faults) starts: its own Redis,
 * prefix, simulator and accounts, scaled down (polls, locks, timeouts), with retries enough that
 * storms of 5xx, drops and timeouts never exhaust them. `extra` overrides any of it.
 */
export function suiteEnv(
  parts: { redisUrl: string; prefix: string; baseUrl: string; accountsFile: string; outDir: string },
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    REDIS_URL: parts.redisUrl,
    VQ_PREFIX: parts.prefix,
    VQ_BASE_URL: parts.baseUrl,
    VQ_ACCOUNTS_FILE: parts.accountsFile,
    VQ_OUT_DIR: parts.outDir,
    // The exports read back by their raw columns, in English (as test/helpers/process.ts).
    VQ_EXPORT_LAYOUT: 'raw',
    VQ_LANG: 'en',
    VQ_CONCURRENCY: '8',
    VQ_POLL_INITIAL: '500ms',
    VQ_POLL_INTERVAL: '300ms',
    VQ_POLL_MAX_INTERVAL: '2s',
    VQ_POLL_DEADLINE: '3m',
    VQ_ATTEMPTS: '40',
    VQ_BACKOFF: '200ms',
    VQ_LOCK_DURATION: '2s',
    VQ_STALLED_INTERVAL: '1s',
    VQ_CONNECT_TIMEOUT: '1s',
    VQ_REQUEST_TIMEOUT: '1500ms',
    // Each key's upstream limit is the account's own rate, in a sliding window: two cores shared by
    // three workers, Redis, the simulator and the test delay a paced request by more than the
    // default 25 ms now and then, which the upstream would count as one request too many.
    VQ_PACING_JITTER: '50ms',
    LOG_LEVEL: 'info',
    ...extra,
  };
}
