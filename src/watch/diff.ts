// What changed between two results of a plate, field by field. A result is whatever the upstream
// answered (vqb does not know its fields), so it is flattened to paths: objects are walked
// (`result.owner.name`), and an array is one field whose value is its JSON (a list of
// restrictions gained an entry: one change, not a shifted index in every later entry). Fields
// named in the ignore list (timestamps, query ids) are left out, at any depth. Answers are data:
// a field may be named `constructor` or `__proto__`, so only own properties are read, into maps
// without a prototype.

/** A plate's result as compared: path → value as text (JSON for anything but a string). */
export type Flat = Record<string, string>;

export interface FieldChange {
  field: string;
  /** '' when the field was not there. */
  before: string;
  after: string;
}

/** Walks `value` into paths; `ignore` names fields (the last part of a path) or whole paths. */
export function flatten(value: unknown, ignore: ReadonlySet<string>): Flat {
  const out: Flat = Object.create(null) as Flat;
  const walk = (v: unknown, path: string) => {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      for (const [k, child] of Object.entries(v as Record<string, unknown>)) {
        const p = path === '' ? k : `${path}.${k}`;
        if (!ignore.has(k) && !ignore.has(p)) walk(child, p);
      }
      return;
    }
    out[path === '' ? '$' : path] = typeof v === 'string' ? v : (JSON.stringify(v) ?? '');
  };
  walk(value, '');
  return out;
}

/** Every field whose text differs, appeared or went, in path order. */
export function compare(before: Flat, after: Flat): FieldChange[] {
  const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const changes: FieldChange[] = [];
  for (const field of fields) {
    // Object.hasOwn: a field absent on one side is '', never an inherited member (`constructor`).
    const b = Object.hasOwn(before, field) ? String(before[field]) : '';
    const a = Object.hasOwn(after, field) ? String(after[field]) : '';
    if (b !== a) changes.push({ field, before: b, after: a });
  }
  return changes;
}
