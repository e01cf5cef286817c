// Where the console may send a browser back to (`/lang?back=`, the sign-in's follow-up, a pause
// button's return): a path of this site only. Issue 35 (5): a check on the raw text let
// `/\t/evil.example` through, because a browser drops tabs and newlines from a URL and then reads
// `//evil.example` as another host. So the target is parsed as the browser would parse it,
// against an origin of our own, and kept only when it stays on that origin as a plain path;
// what goes out is the parser's serialization (ASCII, percent-encoded), which a Location header
// always takes (`/。` once made the redirect itself throw: a 500).

/** An origin no real request has: a target that ends up anywhere else left this site. */
const OWN = 'http://own.invalid';
/** Longer than any path the console makes; a longer one is not ours. */
const MAX_LENGTH = 2_048;
/** Control characters (tab, newline, DEL…) and backslashes, which browsers read as `/`. */
const UNSAFE = /[\u0000-\u001f\u007f\\]/;

/** A path on this site to go back to (`/batches/x?y=1`); anything else is `/`. */
export function localPath(back: unknown): string {
  if (typeof back !== 'string' || back.length > MAX_LENGTH) return '/';
  // A plain path starts with one slash and holds no character a browser would drop or turn into one.
  if (!back.startsWith('/') || back.startsWith('//') || UNSAFE.test(back)) return '/';
  let url: URL;
  try {
    url = new URL(back, OWN);
  } catch {
    return '/';
  }
  if (url.origin !== OWN) return '/';
  const path = `${url.pathname}${url.search}`;
  // Dot segments can make `//` again (`/.//evil` is `//evil`), and percent-encoding can hide a
  // slash, a backslash or a tab from the checks above (`/%2F%2Fevil`): look at the decoded path too.
  let decoded: string;
  try {
    decoded = decodeURIComponent(url.pathname);
  } catch {
    return '/';
  }
  if (url.pathname.includes('//') || decoded.includes('//') || UNSAFE.test(decoded)) return '/';
  return path;
}
