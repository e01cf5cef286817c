// The few calls the rest of vqb makes to trace a plate (docs/operations.md, "Tracing"). Only the
// OpenTelemetry API is imported here: with tracing off (the default) it is the API's no-op, and
// every helper below returns before it builds anything. The SDK, the exporter and the
// instrumentations load only in start.ts, imported by boot.ts when an OTEL_* exporter is set.
import { createHash } from 'node:crypto';
import {
  type Attributes,
  type Context,
  context,
  type Link,
  propagation,
  type Span,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';

export type { Attributes } from '@opentelemetry/api';

/** The SDK when started (start.ts). */
export interface Telemetry {
  /** Flushes the spans not yet exported, then stops the SDK. */
  stop(): Promise<void>;
}

/** What BullMQ's `telemetry` option takes (bullmq-otel's BullMQOtel); opaque here. */
export type QueueTelemetry = object;

let on = false;
let queueTelemetry: QueueTelemetry | undefined;

/** Called once by start.ts when the SDK is running: from here on the helpers record spans. */
export function tracingStarted(telemetry: QueueTelemetry): void {
  on = true;
  queueTelemetry = telemetry;
}

export function tracing(): boolean {
  return on;
}

/** BullMQ's `telemetry` option for a Queue or Worker: nothing when tracing is off (no cost at all). */
export function withQueueTelemetry(): { telemetry?: never } {
  return (queueTelemetry === undefined ? {} : { telemetry: queueTelemetry }) as { telemetry?: never };
}

const tracer = () => trace.getTracer('vqb');

/** Span names, one place: what docs/operations.md lists. */
export const SPAN = {
  run: 'vqb.run',
  inboxFile: 'vqb.inbox.file',
  batch: 'vqb.batch',
  plate: 'vqb.plate',
  schedulerWait: 'vqb.scheduler.wait',
  create: 'vqb.create',
  slotWait: 'vqb.slot.wait',
  poll: 'vqb.poll',
  store: 'vqb.store',
  webhook: 'vqb.webhook.deliver',
} as const;

/**
 * Runs `fn` inside a span named `name` (a child of the active span), ending it when `fn` settles;
 * with tracing off, just runs `fn`.
 */
export async function spanned<T>(
  name: string,
  attributes: Attributes,
  fn: () => Promise<T>,
  /** The span may be ended before `fn` settles, by `endStep` (a step followed by a wait). */
  step = false,
): Promise<T> {
  if (!on) return fn();
  return tracer().startActiveSpan(name, { attributes }, async (span) => {
    if (step) steps.add(span);
    try {
      return await fn();
    } catch (err) {
      if (span.isRecording()) failed(span, err);
      throw err;
    } finally {
      if (span.isRecording()) span.end();
    }
  });
}

const steps = new WeakSet<Span>();

/** Ends the active span now if it is a step's (`spanned(…, step)`): what follows is another step's wait. */
export function endStep(): void {
  if (!on) return;
  const span = trace.getActiveSpan();
  if (span !== undefined && steps.has(span) && span.isRecording()) span.end();
}

/** Runs a function in a context kept earlier. */
export type Within = <T>(fn: () => T) => T;

/** The active context, kept to run later work beside the span active now rather than inside it. */
export function keepContext(): Within {
  if (!on) return (fn) => fn();
  const kept = context.active();
  return (fn) => context.with(kept, fn);
}

function failed(span: Span, err: unknown): void {
  // The error's name and code only: an upstream error's message may quote what it answered.
  const e = err as { name?: unknown; code?: unknown };
  span.setStatus({ code: SpanStatusCode.ERROR, message: String(e.code ?? e.name ?? 'error') });
  span.setAttribute('error.type', String(e.code ?? e.name ?? 'error'));
}

/** Adds attributes to the active span (the create or poll in flight, say); nothing when off. */
export function annotate(attributes: Attributes): void {
  if (on) trace.getActiveSpan()?.setAttributes(attributes);
}

/** The active span's ids, for a log line (pino's mixin); empty when no span is recording. */
export function logIds(): { trace_id?: string; span_id?: string } {
  if (!on) return {};
  const ctx = trace.getActiveSpan()?.spanContext();
  return ctx === undefined ? {} : { trace_id: ctx.traceId, span_id: ctx.spanId };
}

/** The active trace id, for an exemplar; undefined when none is sampled. */
export function activeTraceId(): string | undefined {
  if (!on) return undefined;
  const ctx = trace.getActiveSpan()?.spanContext();
  return ctx !== undefined && (ctx.traceFlags & 1) === 1 ? ctx.traceId : undefined;
}

/** W3C `traceparent` of a context (the active one by default): what travels with a plate. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}

/** The context a stored `traceparent` names, to start spans under. */
export function contextOf(traceparent: string): Context {
  return propagation.extract(context.active(), { traceparent });
}

/** BullMQ's telemetry metadata for a job (bullmq-otel's shape: the carrier as JSON). */
export function jobMetadataOf(traceparent: string): string {
  return JSON.stringify({ traceparent });
}

/** A plate as a span may carry it: a short hash, or the plate itself when VQ_TRACE_PLATES=true. */
export function plateAttribute(plate: string, shown: boolean): Attributes {
  return shown ? { 'vqb.plate': plate } : { 'vqb.plate.hash': plateHash(plate) };
}

/** The first 16 hex digits of the plate's SHA-256: the same plate, the same hash, in every trace. */
export function plateHash(plate: string): string {
  return createHash('sha256').update(plate).digest('hex').slice(0, 16);
}

/**
 * Starts the root span of each plate's own trace (a new trace, linked to the active span: the
 * batch), returns each plate's `traceparent` and a function that ends them. Nothing when off.
 */
export function startPlateTraces(
  plates: readonly string[],
  attributes: Attributes,
  shown: boolean,
): { carried: Map<string, string>; end: () => void } {
  const carried = new Map<string, string>();
  if (!on || plates.length === 0) return { carried, end() {} };
  const batch = trace.getActiveSpan()?.spanContext();
  const links: Link[] = batch === undefined ? [] : [{ context: batch }];
  const spans: Span[] = [];
  for (const plate of plates) {
    const span = tracer().startSpan(SPAN.plate, {
      root: true,
      links,
      attributes: { ...attributes, ...plateAttribute(plate, shown) },
    });
    spans.push(span);
    const parent = traceparentOf(trace.setSpan(context.active(), span));
    if (parent !== undefined && (span.spanContext().traceFlags & 1) === 1) carried.set(plate, parent);
  }
  return {
    carried,
    end: () => {
      for (const span of spans) span.end();
    },
  };
}

/**
 * A wait that has ended, recorded after the fact under the plate's stored context: from `since`
 * (epoch ms) to now, with why. Returns the wait span's `traceparent` (what the job carries on).
 */
export function recordWait(traceparent: string, since: number, attributes: Attributes): string | undefined {
  if (!on) return undefined;
  const parent = contextOf(traceparent);
  const span = tracer().startSpan(SPAN.schedulerWait, { startTime: since, attributes }, parent);
  span.end();
  return traceparentOf(trace.setSpan(parent, span));
}
