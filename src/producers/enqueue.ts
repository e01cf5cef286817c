// Where every front door hands a batch to the queue. Today: the process's one ingest line, shared
// by the HTTP API and the console (a route file used to export it, so the console imported the API).

/**
 * Runs this process's ingests one at a time. Two identical requests at once (a client retrying on a
 * timeout, the same file confirmed in the console) are already kept from storing the rows twice by
 * ingest's own Redis lock (BatchStore.lockIngest); this queue only keeps one process from ingesting
 * several files at once. The upstream pace, not ingest, bounds throughput, so it costs nothing that matters.
 */
function serialized(): <T>(fn: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (fn) => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => {});
    return run;
  };
}

/** The process's one ingest queue: POST /v1/batches and the console's confirm share it. */
export const ingestOnce = serialized();
