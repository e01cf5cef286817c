// Run-time control of the simulator over HTTP, no key needed (it is a test double):
//   GET  /__stats[?plates=1][&times=1] statistics (with per-plate creates and per-query gets; with
//                                      the arrival time of every counted request, per key)
//   GET  /__admin/keys                 list keys
//   POST /__admin/keys                 add or replace a key {key, permissions?, expiresAt?, plan?,
//                                      rateLimit?, dailyQuota?, sharesWith?}
//   POST /__admin/keys/:key/expire     the key expires now (401 EXPIRED_API_KEY from then on)
//   POST /__admin/keys/:key/revoke     the key is revoked (401 INVALID_API_KEY from then on)
//   GET  /__admin/config               current options
//   PATCH /__admin/config              JSON patch of options (rateLimit, window, failRate, ...)
//   POST /__admin/reset                clear stats and limiter/quota state; queries and keys stay
//   POST /__admin/changes              {share?: 0.1, plates?: [...]}: those vehicles get a new restriction
//                                      or owner from now on; answers the changes made (plate, field, before, after)
//   GET  /__admin/changes              every change made so far
// Admin calls bypass keys, limits, faults and latency, and are not counted in the stats.

import { z } from 'zod';
import type { SimulatorEngine } from './engine.js';
import { keySpecSchema } from './options.js';
import { errorReply, jsonReply, type Reply } from './reply.js';

const changeSpec = z.object({
  share: z.number().min(0).max(1).optional(),
  plates: z.array(z.string().min(1)).optional(),
});

export function isAdminPath(path: string): boolean {
  return path === '/__stats' || path === '/__admin' || path.startsWith('/__admin/');
}

export function handleAdmin(
  engine: SimulatorEngine,
  method: string,
  path: string,
  search: URLSearchParams,
  body: string,
): Reply {
  if (path === '/__stats' && method === 'GET') {
    const flag = (name: string) => {
      const value = search.get(name);
      return value !== null && value !== '0' && value !== 'false';
    };
    return jsonReply(200, engine.snapshot(flag('plates'), flag('times')));
  }
  if (path === '/__admin/keys' && method === 'GET') return jsonReply(200, { keys: engine.keys.list() });
  if (path === '/__admin/keys' && method === 'POST') {
    const parsed = parseJson(body);
    if (!parsed.ok) return parsed.reply;
    const spec = keySpecSchema.safeParse(parsed.value);
    if (!spec.success) return invalid(spec.error.issues[0]);
    return jsonReply(201, engine.keys.add(spec.data as Parameters<typeof engine.keys.add>[0]));
  }
  const keyAction = /^\/__admin\/keys\/([^/]+)\/(expire|revoke)$/.exec(path);
  if (keyAction && method === 'POST') {
    const key = safeDecode(keyAction[1]!);
    const done = keyAction[2] === 'expire' ? engine.keys.expire(key, engine.now()) : engine.keys.revoke(key);
    if (!done) return errorReply(404, 'KEY_NOT_FOUND', `No key named "${key}".`);
    return jsonReply(
      200,
      engine.keys.list().find((k) => k.key === key),
    );
  }
  if (path === '/__admin/config' && method === 'GET') return jsonReply(200, engine.options);
  if (path === '/__admin/config' && method === 'PATCH') {
    const parsed = parseJson(body);
    if (!parsed.ok) return parsed.reply;
    try {
      return jsonReply(200, engine.update(parsed.value));
    } catch (error) {
      return errorReply(400, 'INVALID_CONFIG', (error as Error).message);
    }
  }
  if (path === '/__admin/changes' && method === 'GET') return jsonReply(200, { changes: engine.changes.log() });
  if (path === '/__admin/changes' && method === 'POST') {
    const parsed = parseJson(body);
    if (!parsed.ok) return parsed.reply;
    const spec = changeSpec.safeParse(parsed.value);
    if (!spec.success) return invalid(spec.error.issues[0]);
    const options = {
      ...(spec.data.share !== undefined ? { share: spec.data.share } : {}),
      ...(spec.data.plates !== undefined ? { plates: spec.data.plates } : {}),
    };
    return jsonReply(200, { changes: engine.changeVehicles(options) });
  }
  if (path === '/__admin/reset' && method === 'POST') {
    engine.reset();
    return jsonReply(200, { ok: true });
  }
  return errorReply(404, 'NOT_FOUND', `Cannot ${method} ${path}`);
}

function parseJson(body: string): { ok: true; value: unknown } | { ok: false; reply: Reply } {
  try {
    return { ok: true, value: JSON.parse(body) };
  } catch {
    return { ok: false, reply: errorReply(400, 'INVALID_BODY', 'Request body must be JSON.') };
  }
}

function invalid(issue: { path: PropertyKey[]; message: string } | undefined): Reply {
  const where = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
  return errorReply(400, 'INVALID_BODY', `${where}: ${issue?.message ?? 'invalid'}`);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
