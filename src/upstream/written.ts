// When a request's bytes actually leave: undici calls a handler's onRequestStart on the socket the
// request is about to be written to, after the connection (TCP, TLS) is open. The pacing looks at
// the clock before the request is handed to undici; a connection opened in between (the first
// request of a process, one after the upstream closed an idle connection, one more when the
// requests in flight grow) makes it leave later than that look, by a handshake. The caller is told
// the moment so it can account for it (workers/flow.ts).
import type { Dispatcher } from 'undici';

/** The request option that carries the callback (a symbol: undici ignores keys it does not know). */
export const WRITTEN = Symbol('vqb.written');

type WithWritten = Dispatcher.DispatchOptions & { [WRITTEN]?: () => void };

/** Tells `written` once, right before the request is written, then hands every event on unchanged. */
class WrittenHandler implements Dispatcher.DispatchHandler {
  readonly #inner: Dispatcher.DispatchHandler;
  #written: (() => void) | undefined;

  constructor(inner: Dispatcher.DispatchHandler, written: () => void) {
    this.#inner = inner;
    this.#written = written;
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    const written = this.#written;
    // Once: a request retried on another socket by undici is one request to the pacing.
    this.#written = undefined;
    written?.();
    this.#inner.onRequestStart?.(controller, context);
  }

  onRequestUpgrade(...args: Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestUpgrade']>>): void {
    this.#inner.onRequestUpgrade?.(...args);
  }

  onResponseStart(...args: Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseStart']>>): void {
    this.#inner.onResponseStart?.(...args);
  }

  onResponseData(...args: Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseData']>>): void {
    this.#inner.onResponseData?.(...args);
  }

  onResponseEnd(...args: Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseEnd']>>): void {
    this.#inner.onResponseEnd?.(...args);
  }

  onResponseError(...args: Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseError']>>): void {
    this.#inner.onResponseError?.(...args);
  }
}

/** The dispatcher, with requests that carry a `WRITTEN` callback told when they are written. */
export function withWriteNotice(dispatcher: Dispatcher): Dispatcher {
  return dispatcher.compose((dispatch) => (opts, handler) => {
    const written = (opts as WithWritten)[WRITTEN];
    return dispatch(opts, written ? new WrittenHandler(handler, written) : handler);
  });
}
