// Bull Board, the queue dashboard, mounted in the API server at /admin/queues: one queue per
// account, read-only (its retry and clean bypass vqb's records: a retried plate must go through
// `vqb retry`), behind the same service-token check as the API (`guard`).
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PlateQueue } from '../queue/account-queues.js';

export const DASHBOARD_PATH = '/admin/queues';

export async function mountDashboard(
  app: FastifyInstance,
  queues: readonly PlateQueue[],
  guard: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  createBullBoard({ queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: true })), serverAdapter, options: { uiConfig: { boardTitle: 'vqb' } } });
  await app.register(
    async (scope) => {
      scope.addHook('onRequest', guard);
      await scope.register(serverAdapter.registerPlugin());
    },
    { prefix: DASHBOARD_PATH },
  );
}
