// Writing a batch's exports: the stored rows and outcomes through the configured sink. Used when a
// batch finishes (vqb run, the drop folder) and on demand (vqb export, the HTTP API).
import type { Config } from '../config.js';
import type { BatchStore } from '../queue/batch/store.js';
import type { OutcomeStore } from '../queue/batch/outcomes.js';
import { batchExportSource } from './batch-source.js';
import { FileSink } from './file-sink.js';
import type { ExportFormat, ExportResult, ExportSink } from './types.js';

export const ALL_FORMATS: readonly ExportFormat[] = ['csv', 'jsonl'];

export function fileSinkFor(config: Pick<Config, 'outDir' | 'csvDelimiter'>, dir = config.outDir): ExportSink {
  return new FileSink({ dir, csvDelimiter: config.csvDelimiter });
}

export async function exportBatch(
  stores: { batches: BatchStore; outcomes: OutcomeStore },
  sink: ExportSink,
  batchId: string,
  formats: readonly ExportFormat[] = ALL_FORMATS,
): Promise<ExportResult> {
  return sink.write(await batchExportSource(stores.batches, stores.outcomes, batchId), formats);
}
