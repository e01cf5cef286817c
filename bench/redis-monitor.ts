// MONITOR on a socket of its own, read line by line: what the bench and a few tests count Redis
// commands with. ioredis's monitor mode loses its footing on a busy server (a line arriving in the
// same read as MONITOR's +OK is taken for a reply nobody asked for: "Command queue state error",
// emitted where no listener hears it), which ended a cold-gate run and failed a CI test run.
import { connect, type Socket } from 'node:net';

export interface MonitorLine {
  /** Epoch ms Redis stamped the command with. */
  at: number;
  /** `lua` for a call a script made, else the client's address. */
  source: string;
  /** The command and its arguments, unquoted. */
  args: string[];
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '"': '"', '\\': '\\' };

/** `"evalsha" "6a…" "1" "key"` → its arguments (Redis quotes each, escaping as sdscatrepr does). */
export function monitorArgs(text: string): string[] {
  const args: string[] = [];
  for (const m of text.matchAll(/"((?:[^"\\]|\\.)*)"/g))
    args.push(
      m[1]!.replace(/\\x([0-9a-fA-F]{2})|\\(.)/g, (_, hex: string | undefined, c: string | undefined) =>
        hex !== undefined ? String.fromCharCode(Number.parseInt(hex, 16)) : (ESCAPES[c!] ?? c!),
      ),
    );
  return args;
}

/** One MONITOR line (`+1795871646.055166 [0 127.0.0.1:34538] "get" "k"`), or undefined for another reply. */
export function monitorLine(raw: string): MonitorLine | undefined {
  const m = /^\+(\d+(?:\.\d+)?) \[\d+ ([^\]]+)\] (.*)$/.exec(raw);
  if (!m) return undefined;
  return { at: Number(m[1]) * 1_000, source: m[2]!, args: monitorArgs(m[3]!) };
}

/** Watches every command `url`'s Redis runs until `stop()`; resolves once MONITOR is on. */
export async function monitorRedis(url: string, onLine: (line: MonitorLine) => void): Promise<{ stop(): void }> {
  const { hostname, port, password, username } = new URL(url);
  const socket: Socket = connect(Number(port || 6379), hostname || '127.0.0.1');
  let buffered = '';
  let stopped = false;
  socket.setEncoding('utf8');
  // Observation only: a socket error ends the watch, never the process.
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: string) => {
      buffered += chunk;
      let end = buffered.indexOf('\r\n');
      while (end >= 0) {
        const raw = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        end = buffered.indexOf('\r\n');
        if (raw.startsWith('-')) reject(new Error(`MONITOR refused: ${raw.slice(1)}`));
        else if (raw === '+OK') resolve();
        else if (!stopped) {
          const line = monitorLine(raw);
          if (line) onLine(line);
        }
      }
    };
    socket.on('data', onData);
    socket.once('connect', () => {
      const auth = password
        ? `AUTH ${username ? `${decodeURIComponent(username)} ` : ''}${decodeURIComponent(password)}\r\n`
        : '';
      socket.write(`${auth}MONITOR\r\n`);
    });
    socket.once('close', () => reject(new Error('MONITOR: the connection closed')));
  });
  return {
    stop() {
      stopped = true;
      socket.destroy();
    },
  };
}
