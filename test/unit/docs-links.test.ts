// Every relative link of the README and the docs/ pages points at a file that exists, and every
// `#anchor` at a heading of its page (GitHub's slugs): moving a section breaks this test, not a reader.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const PAGES = [
  'README.md',
  'CHANGELOG.md',
  'bench/RESULTS.md',
  ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`),
].filter((p) => p.endsWith('.md'));

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(page: string): Set<string> {
  const text = readFileSync(join(ROOT, page), 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1]!)));
}

describe('links in the README and docs/', () => {
  it('finds the pages', () => {
    expect(PAGES.length).toBeGreaterThan(8);
  });

  it.each(PAGES)('%s: every relative link and anchor resolves', (page) => {
    const text = readFileSync(join(ROOT, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    const broken: string[] = [];
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^(https?:|mailto:)/.test(target)) continue;
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? page : join(dirname(page), path);
      if (!existsSync(join(ROOT, file))) {
        broken.push(`${target}: no file ${file}`);
        continue;
      }
      if (anchor !== undefined && file.endsWith('.md') && !anchors(file).has(anchor))
        broken.push(`${target}: no heading #${anchor} in ${file}`);
    }
    expect(broken).toEqual([]);
  });

  it('the README stays a way in, not the manual (at most ~250 lines)', () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(250);
  });
});
