// Writing a batch's exports: the stored rows and outcomes through the configured sink. Used when a
// batch finishes (vqb run, the drop folder) and on demand (vqb export, the HTTP API).
import type { Config } from '../config.js';
import { BatchNotFoundError } from '../errors.js';
import type { OutcomeStore } from '../queue/batch/outcomes.js';
import type { BatchKey, BatchStore } from '../queue/batch/store.js';
import { EXPORT_FORMATS } from '../schemas/result-row.js';
import { BatchArchive } from './archive.js';
import { batchExportSource } from './batch-source.js';
import { FileSink } from './file-sink.js';
import type { ExportFormat, ExportResult, ExportSink, ExportSource } from './types.js';

/** The exports people open: the layout, language and clock the settings say. */
export function fileSinkFor(
  config: Pick<Config, 'outDir' | 'csvDelimiter' | 'exportLayout' | 'lang' | 'timeZone'>,
  dir = config.outDir,
): ExportSink {
  return new FileSink({
    dir,
    csvDelimiter: config.csvDelimiter,
    words: { layout: config.exportLayout, lang: config.lang, timeZone: config.timeZone },
  });
}

export async function exportBatch(
  stores: { batches: BatchStore; outcomes: OutcomeStore },
  sink: ExportSink,
  batch: BatchKey,
  formats: readonly ExportFormat[] = EXPORT_FORMATS,
  archive?: BatchArchive,
): Promise<ExportResult> {
  return sink.write(await exportSourceFor(stores, batch, archive), formats);
}

/**
 * A batch's rows from Redis while it is there, else from its archive (retention deleted it from
 * Redis): every export format and the HTTP results read either the same way.
 */
export async function exportSourceFor(
  stores: { batches: BatchStore; outcomes: OutcomeStore },
  batch: BatchKey,
  archive?: BatchArchive,
): Promise<ExportSource> {
  if (archive === undefined || (await stores.batches.exists(batch)))
    return batchExportSource(stores.batches, stores.outcomes, batch);
  const manifest =
    typeof batch === 'string' ? await archive.manifest(batch) : await archive.manifestFor(batch.id, [batch.account]);
  if (manifest === undefined) throw new BatchNotFoundError(typeof batch === 'string' ? batch : batch.id);
  return archive.source(manifest);
}

export function archiveFor(config: Pick<Config, 'retention' | 'csvDelimiter'>, now?: () => number): BatchArchive {
  return new BatchArchive({
    dir: config.retention.archiveDir,
    csvDelimiter: config.csvDelimiter,
    ...(now ? { now } : {}),
  });
}
