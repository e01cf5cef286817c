// Reading a Prometheus exposition the way a scraper does: `promtool check metrics` (Debian's
// `prometheus` package; .ci/run installs it) and the samples by name and labels, whatever the
// order of the labels on the line.
import { spawn } from 'node:child_process';

/** promtool's verdict on a Prometheus text exposition: `ok` only when it found nothing at all. */
export async function promtoolCheck(text: string): Promise<{ ok: boolean; output: string }> {
  const child = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'ENOENT'
          ? new Error(
              "promtool not found: install Debian's prometheus package (apt-get install prometheus), as .ci/run does",
            )
          : err,
      ),
    );
    child.on('close', resolve);
    child.stdin.end(text);
  });
  return { ok: code === 0 && output.trim() === '', output: output.trim() };
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The sample lines of an exposition (Prometheus text or OpenMetrics). */
export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The samples named `name` whose labels include `labels`. */
export function select(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** Their sum (0 when there are none), as `sum(name{labels})` would read. */
export function sumOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return select(samples, name, labels).reduce((total, s) => total + s.value, 0);
}

/** The metric families declared by `# TYPE` lines: name → type. */
export function families(text: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const match of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(match[1]!, match[2]!);
  return types;
}
