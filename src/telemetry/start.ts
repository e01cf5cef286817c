// The OpenTelemetry SDK, started only when boot.ts says so. The SDK reads its settings from the
// standard variables itself (OTEL_EXPORTER_OTLP_ENDPOINT, _PROTOCOL, OTEL_TRACES_SAMPLER,
// OTEL_SERVICE_NAME, OTEL_BSP_*…). The kept instrumentations: @fastify/otel (the API's and the
// console's requests), undici (the upstream's and the webhooks' requests), ioredis (Redis
// commands, only inside a span: a worker's timers would otherwise make a trace per command), and
// BullMQ's own telemetry through bullmq-otel.
import { register } from 'node:module';
import { FastifyOtelInstrumentation } from '@fastify/otel';
import { INVALID_SPAN_CONTEXT, trace } from '@opentelemetry/api';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { Span as QueueSpan, Telemetry } from 'bullmq';
import { BullMQOTelSpan, BullMQOtel } from 'bullmq-otel';
import { plateHash, type Telemetry as Started, tracingStarted } from './index.js';

/** The name of every plate job (queue/account-queues.ts JOB_NAME; not imported: this folder imports nothing of vqb). */
const JOB_NAME = 'plate';

/**
 * BullMQ's spans that belong to a plate's trace: `process` (a job's activation, under the context
 * its job carries) and `add` (a webhook delivery queued by a plate's last step). Its loop's own
 * spans (getNextJob, addBulk of the feeder, stalled checks) would each start a trace of their own.
 */
const KEPT = /^(process|add) /;

function queueTelemetry(): Telemetry {
  const otel = new BullMQOtel({ tracerName: 'bullmq' });
  const nothing = new BullMQOTelSpan(trace.wrapSpanContext(INVALID_SPAN_CONTEXT));
  return {
    contextManager: otel.contextManager,
    tracer: {
      startSpan: (name, options, ctx) =>
        KEPT.test(name) ? withoutPlates(otel.tracer.startSpan(name, options, ctx)) : nothing,
    },
  };
}

/** A plate job's id is `<batch>.<plate>`: BullMQ's span carries it with the plate as its hash. */
function withoutPlates(span: QueueSpan): QueueSpan {
  const set = span.setAttributes.bind(span);
  span.setAttributes = (attributes) => {
    const id = attributes['bullmq.job.id'];
    if (attributes['bullmq.job.name'] === JOB_NAME && typeof id === 'string' && id.includes('.')) {
      const at = id.lastIndexOf('.');
      set({ ...attributes, 'bullmq.job.id': `${id.slice(0, at)}.${plateHash(id.slice(at + 1))}` });
    } else set(attributes);
  };
  return span;
}

export function startTelemetry(env: NodeJS.ProcessEnv): Started {
  // ESM modules are instrumented through import-in-the-middle's loader hook.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const sdk = new NodeSDK({
    ...(env.OTEL_SERVICE_NAME ? {} : { serviceName: 'vqb' }),
    instrumentations: [
      new FastifyOtelInstrumentation({ registerOnInitialization: true, ignorePaths: '/metrics' }),
      new UndiciInstrumentation(),
      // The command's name only: its arguments hold plates, results and a key's Redis names.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    ],
  });
  sdk.start();
  tracingStarted(queueTelemetry());
  return { stop: () => sdk.shutdown() };
}
