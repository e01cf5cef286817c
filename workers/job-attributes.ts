// What a plate job's spans carry (src/telemetry/): its account, key, batch and class; never the
// plate (its root span has it, hashed), the key's secret or the answer.

import type { PlateJobData } from '../src/queue/types.js';
import type { Attributes } from '../src/telemetry/index.js';

export function jobAttributes(data: PlateJobData): Attributes {
  return {
    'vqb.account.id': data.account,
    ...(data.key !== undefined ? { 'vqb.key.account': data.key } : {}),
    'vqb.batch.id': data.batchId,
    'vqb.batch.class': data.cls,
  };
}
