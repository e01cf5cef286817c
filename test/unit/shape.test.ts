// The shape of the code a newcomer reads (issue 36): no line over 120 characters in src/ outside
// the HTML, CSS and script templates of the console, and no function over 120 lines. Read off the
// TypeScript syntax tree, so a comment, a string or a template is told apart from code.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');
const MAX_LINE = 120;
const MAX_FUNCTION_LINES = 120;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

interface Read {
  file: string;
  source: ts.SourceFile;
  lines: string[];
}

function read(file: string): Read {
  const text = readFileSync(file, 'utf8');
  return {
    file: relative(ROOT, file),
    source: ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true),
    lines: text.split('\n'),
  };
}

const lineOf = (source: ts.SourceFile, pos: number) => source.getLineAndCharacterOfPosition(pos).line;

/** Lines (0-based) inside a template of markup: HTML (a `<tag`), or the console's style sheet and script. */
function markupLines({ source, file }: Read): Set<number> {
  const inside = new Set<number>();
  const visit = (node: ts.Node) => {
    if (ts.isTemplateExpression(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      const text = node.getText(source);
      if (/<[a-z!/]/i.test(text) || file.endsWith('console/assets.ts')) {
        for (let l = lineOf(source, node.getStart(source)); l <= lineOf(source, node.getEnd()); l++) inside.add(l);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return inside;
}

function functionName(node: ts.Node, source: ts.SourceFile): string {
  const named = node as { name?: ts.Node };
  if (named.name) return named.name.getText(source);
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText(source);
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText(source);
  return `(anonymous at line ${lineOf(source, node.getStart(source)) + 1})`;
}

function longFunctions({ source, file }: Read): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const lines = lineOf(source, node.getEnd()) - lineOf(source, node.getStart(source)) + 1;
      if (lines > MAX_FUNCTION_LINES) found.push(`${file} ${functionName(node, source)}: ${lines} lines`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('the shape of src/ and workers/', () => {
  const all = [...files(SRC), ...files(join(ROOT, 'workers'))].map(read);

  it('reads the whole tree', () => {
    expect(all.length).toBeGreaterThan(100);
  });

  it(`has no line over ${MAX_LINE} characters outside markup templates`, () => {
    const long = all.flatMap((r) => {
      const markup = markupLines(r);
      return r.lines.flatMap((line, i) =>
        line.length > MAX_LINE && !markup.has(i) ? [`${r.file}:${i + 1} (${line.length})`] : [],
      );
    });
    expect(long).toEqual([]);
  });

  it(`has no function over ${MAX_FUNCTION_LINES} lines`, () => {
    expect(all.flatMap(longFunctions)).toEqual([]);
  });
});
