// A local stand-in for the paid vehicle API, for tests, demos and benchmarks. See
// /work/shared/upstream-api.md for the contract it follows; extensions beyond the contract:
//   - 429 bodies carry `error.retryAfterMs`, the exact wait in ms (scaled-down tests need it);
//   - faults (errorRate, dropRate) are drawn after the request was counted against the rate
//     limit and quota, as a failed request upstream still costs quota;
//   - dropAfterCreateRate creates the query and then drops the connection (outcome unknown).
import { clock } from '../clock.js';
import { SimulatorEngine } from './engine.js';
import type { KeyInfo } from './keys.js';
import { DEFAULT_OPTIONS, type KeySpec, resolveOptions, type SimulatorOptions } from './options.js';
import { listen } from './server.js';
import type { SimulatorStats } from './stats.js';

export { parseSimulatorArgs, SIMULATOR_USAGE } from './args.js';
export type { KeyInfo } from './keys.js';
export type { KeySpec, Permission, Plan, SimulatorOptions, WindowKind } from './options.js';
export { DEFAULT_KEYS, DEFAULT_OPTIONS, PERMISSION_LABELS, PERMISSIONS } from './options.js';
export type { SimulatorStats } from './stats.js';

export interface SimulatorKeys {
  /** Adds a key or replaces the one with the same name. */
  add(spec: KeySpec): KeyInfo;
  /** The key expires now; false if unknown. */
  expire(key: string): boolean;
  /** The key is revoked; false if unknown. */
  revoke(key: string): boolean;
  list(): KeyInfo[];
}

export interface SimulatorHandle {
  /** e.g. http://127.0.0.1:41234 — use as the client's base URL. */
  url: string;
  port: number;
  close(): Promise<void>;
  stats(options?: { plates?: boolean; times?: boolean }): SimulatorStats;
  /** Changes options at run time (same as PATCH /__admin/config); `keys` replaces all keys. */
  update(patch: Partial<SimulatorOptions>): void;
  /** Clears stats and limiter/quota state; queries and keys stay (same as POST /__admin/reset). */
  reset(): void;
  options(): SimulatorOptions;
  keys: SimulatorKeys;
}

export interface SimulatorDeps {
  now?: () => number;
  random?: () => number;
}

export async function startSimulator(
  options: Partial<SimulatorOptions> = {},
  deps: SimulatorDeps = {},
): Promise<SimulatorHandle> {
  const resolved = resolveOptions(options);
  const engine = new SimulatorEngine(resolved, { now: deps.now ?? clock.now, random: deps.random ?? Math.random });
  const running = await listen(engine, resolved.host, resolved.port);
  engine.stalls.start();
  let closed: Promise<void> | undefined;
  return {
    url: running.url,
    port: running.port,
    close: () => {
      engine.stalls.stop();
      return (closed ??= running.close());
    },
    stats: (opts = {}) => engine.snapshot(opts.plates === true, opts.times === true),
    update: (patch) => {
      engine.update(patch);
    },
    reset: () => engine.reset(),
    options: () => engine.options,
    keys: {
      add: (spec) => engine.keys.add(spec),
      expire: (key) => engine.keys.expire(key, engine.now()),
      revoke: (key) => engine.keys.revoke(key),
      list: () => engine.keys.list(),
    },
  };
}

/** The few lines `vqb simulate` prints on start: where it listens, which keys work, the limits. */
export function formatBanner(handle: SimulatorHandle): string {
  const o = handle.options();
  const lines = [`vqb simulator listening on ${handle.url}`];
  for (const k of handle.keys.list()) {
    const state = k.revoked
      ? ' (revoked)'
      : k.expiresAt && Date.parse(k.expiresAt) <= clock.now()
        ? ` (expired ${k.expiresAt})`
        : '';
    lines.push(`  key ${k.key}: ${k.permissions.join(', ') || 'no permissions'}${state}`);
  }
  const quota = o.quotaWindowMs === null ? `${o.dailyQuota}/day` : `${o.dailyQuota}/${o.quotaWindowMs}ms`;
  lines.push(
    `  limits: ${o.rateLimit} (${o.window}), quota ${quota}; completion ${o.completionMs[0]}-${o.completionMs[1]}ms`,
  );
  lines.push(
    `  try: curl -X POST ${handle.url}/queries/integration/${o.products[0] ?? DEFAULT_OPTIONS.products[0]} ` +
      `-H 'x-api-key: ${handle.keys.list()[0]?.key ?? 'KEY'}' -H 'content-type: application/json' ` +
      `-d '{"keys":{"licensePlate":"ABC1D23"}}'`,
  );
  lines.push(`  stats: ${handle.url}/__stats`);
  return lines.join('\n');
}
