// The export an operations person reads (VQ_EXPORT_LAYOUT=readable, the default): the plate and
// the user's own columns first, then the vehicle's fields under headers in their language, then
// the outcome in words, the technical columns last. The vehicle is the answer's `result` object,
// not its envelope (whose plate and query id repeat columns already there); lists are text
// ("A, B"), times are on the wall clock of VQ_TIME_ZONE. Which raw column each header stands for
// is the table in docs/inputs-and-exports.md; VQ_EXPORT_LAYOUT=raw keeps the layout of csv.ts.
//
// The same contract as CsvLayout (ExportLayout): `learn` every row first, then `names`, `values`;
// a row met later with a column not learned sets `missed` and the file is written again.
import { wallClock } from '../time-text.js';
import { type Lang, type WordKey, wordsFor } from '../words.js';
import { type CellValue, DEFAULT_MAX_RESULT_COLUMNS, type ExportLayout, escapeFormula } from './csv.js';
import type { ExportRow } from './types.js';

/** The vehicle fields vqb names, in the order an operator reads them; any other field follows, under its path. */
const FIELDS = [
  'brand',
  'model',
  'year',
  'modelYear',
  'color',
  'fuel',
  'city',
  'uf',
  'chassis',
  'renavam',
  'situation',
  'restrictions',
] as const;
const FIELD_SET = new Set<string>(FIELDS);

/** Fields of the vehicle that repeat a column the export has already (the plate, as given and normalised). */
const VEHICLE_REPEATS = new Set(['plate', 'licensePlate']);

/**
 * The envelope's fields, when an answer has no `result` object: told apart from the vehicle's.
 * Of these, the id, the plate and the error repeat columns of their own and are left out.
 */
const ENVELOPE = new Set([
  'queryId',
  'id',
  'status',
  'licensePlate',
  'createdAt',
  'completedAt',
  'error',
  'statusCode',
]);
const ENVELOPE_REPEATS = new Set(['queryId', 'id', 'licensePlate', 'error', 'status', 'statusCode']);

/** Text that is an instant with its offset (the upstream's ISO times): shown on the zone's clock too. */
const INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)$/;

/** The technical columns, last: [its words, the row's value]. */
const TECHNICAL: ReadonlyArray<readonly [WordKey, (row: ExportRow) => CellValue | number | undefined, 'time'?]> = [
  ['export.col.row', (r) => r.row],
  ['export.col.normalized', (r) => r.plate],
  ['export.col.queryId', (r) => r.queryId],
  ['export.col.errorCode', (r) => r.error?.code],
  ['export.col.possibleDuplicate', (r) => (r.possibleDuplicate === true ? true : undefined)],
  ['export.col.duplicateOf', (r) => r.duplicateOf],
  ['export.col.sameVehicleAs', (r) => r.sameVehicleAs],
  ['export.col.reused', (r) => (r.reused === true ? true : undefined)],
  ['export.col.enqueuedAt', (r) => r.enqueuedAt, 'time'],
  ['export.col.createdAt', (r) => r.createdAt, 'time'],
  ['export.col.finishedAt', (r) => r.finishedAt, 'time'],
  ['export.col.requests', (r) => r.requests],
  ['export.col.key', (r) => r.key],
];

/** Column widths in characters, as a spreadsheet fits them: at least the header's, at most this. */
const MIN_WIDTH = 6;
const MAX_WIDTH = 60;

export interface ReadableOptions {
  lang: Lang;
  /** IANA zone the times are shown on (VQ_TIME_ZONE). */
  timeZone: string;
  maxResultColumns?: number;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Where an answer holds the vehicle, the provider's name first (the names answers.ts knows for a result). */
const VEHICLE_HOLDERS = ['result', 'resultado', 'veiculo', 'vehicle', 'dados', 'data'];

/** The answer split into the vehicle (its `result` object) and the envelope around it. */
function partsOf(result: ExportRow['result']): {
  vehicle?: Record<string, unknown>;
  envelope: Record<string, unknown>;
} {
  if (result === undefined) return { envelope: {} };
  const holder = VEHICLE_HOLDERS.find((name) => isObject(result[name]));
  if (holder !== undefined) {
    const { [holder]: vehicle, ...envelope } = result;
    return { vehicle: vehicle as Record<string, unknown>, envelope };
  }
  // No result object: the product's fields sit beside the envelope's.
  const vehicle: Record<string, unknown> = {};
  const envelope: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(result)) (ENVELOPE.has(k) ? envelope : vehicle)[k] = v;
  return { vehicle, envelope };
}

/**
 * Each leaf of a value with its path: objects walked, a list of plain values as text ("A, B", an
 * empty list empty), a list holding objects as JSON text.
 */
function leaves(value: unknown, path: string, leaf: (path: string, value: CellValue) => void): void {
  if (value === undefined) return;
  if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) leaves(v, path === '' ? k : `${path}.${k}`, leaf);
    return;
  }
  if (Array.isArray(value)) {
    const plain = value.every((v) => v === null || ['string', 'number', 'boolean'].includes(typeof v));
    leaf(path, plain ? value.filter((v) => v !== null).join(', ') : JSON.stringify(value));
    return;
  }
  if (typeof value === 'string' && INSTANT.test(value) && Number.isFinite(Date.parse(value)))
    leaf(path, new Date(Date.parse(value)));
  else if (value === null || typeof value === 'string' || typeof value === 'boolean') leaf(path, value);
  else if (typeof value === 'number') leaf(path, Number.isFinite(value) ? value : String(value));
  else leaf(path, String(value));
}

/** An instant as a date whose UTC fields are the wall clock of `zone`: a spreadsheet shows it as is. */
function wallDate(ms: number, zone: string): Date {
  const [y, mo, d, h, mi, s] = wallClock(ms, zone);
  return new Date(Date.UTC(y, mo - 1, d, h, mi, s));
}

/** Text a person reads a cell as: what the CSV holds and what a width is fitted to. */
function cellText(value: CellValue): string {
  if (value === null) return '';
  if (value instanceof Date) return value.toISOString().slice(0, 19).replace('T', ' ');
  return typeof value === 'string' ? value : String(value);
}

export class ReadableLayout implements ExportLayout {
  readonly sheet: ExportLayout['sheet'];
  truncated = false;
  missed = false;
  private readonly say: ReturnType<typeof wordsFor>;
  private readonly zone: string;
  private readonly maxResultColumns: number;
  private readonly extraKeys: string[];
  private readonly extraSet: Set<string>;
  private readonly vehiclePaths = new Set<string>();
  private readonly envelopePaths: string[] = [];
  private readonly envelopeSet = new Set<string>();
  /** The widest text seen in each column, by column id. */
  private readonly widest = new Map<string, number>();

  constructor(extraColumns: readonly string[], opts: ReadableOptions) {
    this.say = wordsFor(opts.lang);
    this.zone = opts.timeZone;
    this.maxResultColumns = opts.maxResultColumns ?? DEFAULT_MAX_RESULT_COLUMNS;
    this.extraKeys = [...new Set(extraColumns)];
    this.extraSet = new Set(this.extraKeys);
    this.sheet = {
      results: this.say('export.sheet.results'),
      rejects: this.say('export.sheet.rejects'),
      dateFormat: opts.lang === 'pt-BR' ? 'dd/mm/yyyy hh:mm:ss' : 'yyyy-mm-dd hh:mm:ss',
      widths: () => this.widths(),
    };
  }

  learn(row: ExportRow): boolean {
    const added = this.learnColumns(row);
    for (const [id, value] of this.cellsOf(row)) {
      const width = cellText(value).length;
      if (width > (this.widest.get(id) ?? 0)) this.widest.set(id, width);
    }
    return added;
  }

  /** The row's columns (learn() without the widths: the writing pass only checks for new ones). */
  private learnColumns(row: ExportRow): boolean {
    let added = false;
    for (const key of Object.keys(row.extra)) {
      if (this.extraSet.has(key)) continue;
      this.extraSet.add(key);
      this.extraKeys.push(key);
      added = true;
    }
    const { vehicle, envelope } = partsOf(row.result);
    const fits = () => this.vehiclePaths.size + this.envelopePaths.length < this.maxResultColumns;
    leaves(vehicle, '', (path) => {
      if (VEHICLE_REPEATS.has(path) || this.vehiclePaths.has(path)) return;
      if (!fits()) {
        this.truncated = true;
        return;
      }
      this.vehiclePaths.add(path);
      added = true;
    });
    for (const [k, v] of Object.entries(envelope)) {
      if (ENVELOPE_REPEATS.has(k)) continue;
      leaves(v, `result.${k}`, (path) => {
        if (this.envelopeSet.has(path)) return;
        if (!fits()) {
          this.truncated = true;
          return;
        }
        this.envelopeSet.add(path);
        this.envelopePaths.push(path);
        added = true;
      });
    }
    return added;
  }

  /** Column ids in order: the plate, the user's columns, the vehicle, the outcome, the technical ones. */
  private ids(): string[] {
    const known = FIELDS.filter((f) => this.vehiclePaths.has(f));
    const other = [...this.vehiclePaths].filter((p) => !FIELD_SET.has(p));
    return [
      'plate',
      ...this.extraKeys.map((k) => `x:${k}`),
      ...known.map((p) => `v:${p}`),
      ...other.map((p) => `v:${p}`),
      'outcome',
      'message',
      ...TECHNICAL.map(([key]) => key),
      ...this.envelopePaths.map((p) => `e:${p}`),
    ];
  }

  private nameOf(id: string): string {
    if (id === 'plate') return this.say('export.col.plate');
    if (id === 'outcome') return this.say('export.col.outcome');
    if (id === 'message') return this.say('export.col.message');
    if (id.startsWith('x:') || id.startsWith('e:')) return id.slice(2);
    if (id.startsWith('v:')) {
      const path = id.slice(2);
      return FIELD_SET.has(path) ? this.say(`export.field.${path}` as WordKey) : path;
    }
    return this.say(id as WordKey);
  }

  /** Headers, each once: a user's column named like one of ours gets " (2)" (its own name first). */
  names(): string[] {
    const used = new Set<string>();
    return this.ids().map((id) => {
      const base = this.nameOf(id);
      let name = base;
      for (let n = 2; used.has(name); n++) name = `${base} (${n})`;
      used.add(name);
      return name;
    });
  }

  header(): string[] {
    return this.names().map(escapeFormula);
  }

  /** Every cell the row has, by column id (times already on the zone's wall clock). */
  private cellsOf(row: ExportRow): Map<string, CellValue> {
    const cells = new Map<string, CellValue>();
    cells.set('plate', row.input);
    for (const key of this.extraKeys)
      cells.set(`x:${key}`, Object.hasOwn(row.extra, key) ? (row.extra[key] ?? '') : '');
    const { vehicle, envelope } = partsOf(row.result);
    // The upstream's instants (parsed by leaves() as UTC) on the zone's clock, as ours are.
    const local = (value: CellValue) => (value instanceof Date ? wallDate(value.getTime(), this.zone) : value);
    leaves(vehicle, '', (path, value) => cells.set(`v:${path}`, local(value)));
    for (const [k, v] of Object.entries(envelope))
      leaves(v, `result.${k}`, (path, value) => cells.set(`e:${path}`, local(value)));
    cells.set('outcome', this.say(`export.status.${row.status}`));
    cells.set('message', row.error?.message ?? null);
    for (const [key, get, kind] of TECHNICAL) {
      const value = get(row);
      if (value === undefined) cells.set(key, null);
      else if (kind === 'time') cells.set(key, Number.isFinite(value) ? wallDate(value as number, this.zone) : null);
      else cells.set(key, value as CellValue);
    }
    return cells;
  }

  values(row: ExportRow): CellValue[] {
    if (this.learnColumns(row)) this.missed = true;
    const cells = this.cellsOf(row);
    return this.ids().map((id) => cells.get(id) ?? null);
  }

  /** The row as CSV text: times as "2026-11-28 09:00:32" on the zone's clock, text escaped. */
  cells(row: ExportRow): string[] {
    return this.values(row).map((v) => (typeof v === 'string' ? escapeFormula(v) : cellText(v)));
  }

  rejectNames(): string[] {
    return [
      this.say('export.col.row'),
      this.say('export.col.input'),
      this.say('export.col.reason'),
      this.say('export.col.message'),
    ];
  }

  /** Widths fitted to the header and the widest text learned, within MIN_WIDTH..MAX_WIDTH. */
  private widths(): number[] {
    const names = this.names();
    return this.ids().map((id, i) =>
      Math.min(MAX_WIDTH, Math.max(MIN_WIDTH, names[i]!.length, this.widest.get(id) ?? 0) + 2),
    );
  }
}
