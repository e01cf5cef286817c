// Calling the HTTP API as a client would (fetch over a real port), and checking our error shape.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import type { Config } from '../../src/config.js';
import { createHttpApi } from '../../src/server.js';
import type { Harness } from './engine.js';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export interface CallOptions {
  method?: string;
  json?: unknown;
  body?: string | Uint8Array;
  type?: string;
  /** The token sent (default: the caller's); null sends none. */
  token?: string | null;
  /** How it is sent: `Authorization: Bearer` (default) or `x-api-key`; 'none' sends no token. */
  auth?: 'bearer' | 'x-api-key' | 'none';
  header?: 'x-api-key';
  /** Another server than the caller's. */
  at?: string;
}

/** One request to `base + path` with `defaultToken` unless the options say otherwise. */
export async function apiCall(
  base: string,
  defaultToken: string,
  path: string,
  options: CallOptions = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  const token = options.token === undefined ? defaultToken : options.token;
  const auth = options.auth ?? (options.header === 'x-api-key' ? 'x-api-key' : 'bearer');
  if (token !== null && auth === 'bearer') headers.authorization = `Bearer ${token}`;
  if (token !== null && auth === 'x-api-key') headers['x-api-key'] = token;
  let body: string | Uint8Array | undefined = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] = 'application/json';
  }
  if (options.type) headers['content-type'] = options.type;
  const res = await fetch(`${options.at ?? base}${path}`, {
    method: options.method ?? (body === undefined ? 'GET' : 'POST'),
    headers,
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** Our error shape, exactly: `{statusCode, error: {code, message}}`, no stack trace. */
export function expectError(answer: Pick<Answer, 'status' | 'json' | 'text'>, status: number, code?: string): void {
  expect({ status: answer.status, body: answer.json }).toMatchObject({
    status,
    body: {
      statusCode: status,
      error: { code: code ?? expect.stringMatching(/^[A-Z][A-Z0-9_]+$/), message: expect.any(String) },
    },
  });
  expect(Object.keys(answer.json).sort()).toEqual(['error', 'statusCode']);
  expect(Object.keys(answer.json.error).sort()).toEqual(['code', 'message']);
  expect(answer.text).not.toMatch(/\bat .+\.(ts|js):\d+/);
}

/** The HTTP API (and console) of `h` on a free loopback port, in this process: close it with `app.close()`. */
export async function listenApi(
  h: Harness,
  config: Config = h.config,
): Promise<{ app: FastifyInstance; base: string }> {
  const app = await createHttpApi({ services: h.services, config, logger: h.logs.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}
