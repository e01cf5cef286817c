// Tiny HTTP helpers for simulator tests: one call, parsed JSON, lower-cased headers.
import { Agent, request } from 'undici';

export interface SimResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  json: any;
}

export interface SimCallOptions {
  key?: string;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
}

// One agent per test file; no pipelining, so a dropped socket fails only its own request.
const agent = new Agent({ pipelining: 1, keepAliveTimeout: 1_000 });

export async function simCall(
  base: string,
  method: string,
  path: string,
  options: SimCallOptions = {},
): Promise<SimResponse> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  if (options.key !== undefined) headers['x-api-key'] = options.key;
  const body = options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  const res = await request(`${base}${path}`, {
    method: method as 'GET',
    headers,
    body: body ?? null,
    dispatcher: agent,
  });
  const text = await res.body.text();
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(res.headers)) {
    if (typeof value === 'string') out[name.toLowerCase()] = value;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: out, text, json };
}

export function simCreate(base: string, plate: string, key = 'demo-key', slug = 'agregados'): Promise<SimResponse> {
  return simCall(base, 'POST', `/queries/integration/${slug}`, { key, body: { keys: { licensePlate: plate } } });
}

export function simGet(base: string, queryId: string, key = 'demo-key'): Promise<SimResponse> {
  return simCall(base, 'GET', `/queries/integration/${encodeURIComponent(queryId)}`, { key });
}

/** A clock the test moves by hand; the simulator reads it for limits, quotas and query status. */
export function simClock(start = Date.UTC(2030, 0, 1, 12, 0, 0)): {
  now: () => number;
  t: number;
  advance(ms: number): void;
} {
  const clock = {
    t: start,
    now: () => clock.t,
    advance(ms: number) {
      clock.t += ms;
    },
  };
  return clock;
}
