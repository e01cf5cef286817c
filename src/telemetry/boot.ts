// Whether this process traces, decided from the standard OpenTelemetry variables alone (no VQ_*
// copy): an OTLP endpoint, or a traces exporter other than `none`, turns it on; OTEL_SDK_DISABLED
// turns it off. Off, nothing of the SDK is imported. bin/vqb.js calls `boot` before it imports
// the CLI, so the instrumentations are in place before the modules they watch load.

import type { Telemetry } from './index.js';

export function tracingWanted(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter === 'none') return false;
  return Boolean(exporter || env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

export async function boot(env: NodeJS.ProcessEnv = process.env): Promise<Telemetry | undefined> {
  if (!tracingWanted(env)) return undefined;
  const { startTelemetry } = await import('./start.js');
  return startTelemetry(env);
}
