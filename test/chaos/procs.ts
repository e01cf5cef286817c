// `vqb` child processes for tests that need real processes (SIGKILL, separate event loops): every
// byte a child writes on stdout and stderr is kept, so a test can assert what a user saw and that
// the API key appeared in none of it.
import { spawn, type ChildProcess } from 'node:child_process';
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
