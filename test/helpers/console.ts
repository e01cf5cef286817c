// Signing in to the web console over plain HTTP, as a browser does: the sign-in page first (its
// pre-session cookie and the same token in the form), then the form posted back with both.
import { expect } from 'vitest';

export interface ConsoleSession {
  /** `vqb_session=…`, for the Cookie header. */
  cookie: string;
  /** The whole Set-Cookie of the session (its attributes). */
  setCookie: string;
  /** The session's CSRF token, as the upload form carries it. */
  csrf: string;
}

/** The sign-in form's pre-session token and its cookie (`vqb_signin=…`). */
export async function signInForm(base: string): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${base}/sign-in`);
  const cookie = (res.headers.getSetCookie().find((c) => c.startsWith('vqb_signin=')) ?? '').split(';')[0]!;
  const csrf = /name="csrf" value="([^"]+)"/.exec(await res.text())?.[1] ?? '';
  return { cookie, csrf };
}

/** Posts the sign-in form (the answer as it came, redirects not followed). */
export async function postSignIn(
  base: string,
  token: string,
  form: { cookie: string; csrf: string },
  headers: Record<string, string> = {},
  query = '',
): Promise<Response> {
  return fetch(`${base}/sign-in${query}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: form.cookie, ...headers },
    body: new URLSearchParams({ csrf: form.csrf, token }).toString(),
  });
}

/** Signs in with `token` and returns the session's cookie and CSRF token. */
export async function signIn(
  base: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<ConsoleSession> {
  const res = await postSignIn(base, token, await signInForm(base), headers);
  expect(res.status).toBe(303);
  const setCookie = res.headers.getSetCookie().find((c) => c.startsWith('vqb_session=')) ?? '';
  const cookie = setCookie.split(';')[0]!;
  const page = await (await fetch(`${base}/upload`, { headers: { cookie } })).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? '';
  return { cookie, setCookie, csrf };
}
