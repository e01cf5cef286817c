// One row of a batch's results as the JSONL export and `GET /v1/batches/:id/results?format=jsonl`
// write it (src/sinks/jsonl.ts builds it; its type is this schema's), and the upstream's body it
// carries. Published in /openapi.json as `ResultRow`, so a generated client reads typed rows.
import { z } from 'zod';

// `cancelled`: a plate a cancel dropped (delete --cancel): never sent upstream, never charged.
export const RowStatus = z.enum(['done', 'failed', 'cancelled', 'rejected', 'duplicate', 'pending']);
export type RowStatus = z.output<typeof RowStatus>;

/** The upstream's whole body of a finished query: its status, and the product's fields. */
export const UpstreamResult = z
  .object({
    status: z.string().optional().describe("the query's final status as the upstream wrote it (e.g. COMPLETED)"),
  })
  .catchall(z.unknown())
  .describe("the upstream's whole answer for the finished query (its fields depend on the product)");
export type UpstreamResult = z.output<typeof UpstreamResult>;

const iso = z.iso.datetime();

export const ResultRow = z.object({
  row: z.number().int().describe('1-based number of the data row in the input (header not counted)'),
  input: z.string().describe('the plate exactly as given'),
  plate: z.string().describe("normalised plate; '' when nothing was left of the input"),
  status: RowStatus,
  queryId: z.string().optional(),
  possibleDuplicate: z
    .boolean()
    .optional()
    .describe('the upstream may have charged twice for this plate (a create re-sent after a crash)'),
  duplicateOf: z.number().int().optional().describe('for duplicate rows: the row that was enqueued'),
  sameVehicleAs: z
    .string()
    .optional()
    .describe('another plate of the batch that is the same vehicle in the other format (old ↔ Mercosul)'),
  reused: z
    .boolean()
    .optional()
    .describe('answered from a stored result within the reuse window: no upstream request, no charge'),
  error: z.object({ code: z.string(), message: z.string() }).optional().describe('why a plate failed or was rejected'),
  result: UpstreamResult.optional(),
  enqueuedAt: iso.optional(),
  createdAt: iso.optional(),
  finishedAt: iso.optional(),
  requests: z.number().int().optional().describe('upstream requests spent on this plate'),
  key: z
    .string()
    .optional()
    .describe(
      "the account (its name, never its secret) whose key made the plate's requests; a pooled batch uses several",
    ),
  input_columns: z
    .record(z.string(), z.string())
    .describe('every other input column, by name, so results join back to your records'),
});
export type ResultRow = z.output<typeof ResultRow>;

/**
 * Every export format, in the one place they are listed: every finished batch is written in all of
 * them (`vqb run`, the drop folder, `vqb export --format all`, the library's default), and the
 * HTTP results, `vqb export --format` and the OpenAPI document offer each of them.
 */
export const EXPORT_FORMATS = ['csv', 'jsonl', 'xlsx'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];
