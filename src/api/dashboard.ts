// Bull Board, the queue dashboard, mounted in the API server at /admin/queues. It can retry and
// remove jobs, so it sits behind the same service-token check as the API (`guard`).
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PlateQueue } from '../queue/plate-queue.js';

export const DASHBOARD_PATH = '/admin/queues';

export async function mountDashboard(app: FastifyInstance, queue: PlateQueue, guard: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  createBullBoard({ queues: [new BullMQAdapter(queue)], serverAdapter, options: { uiConfig: { boardTitle: 'vqb' } } });
  await app.register(
    async (scope) => {
      scope.addHook('onRequest', guard);
      await scope.register(serverAdapter.registerPlugin());
    },
    { prefix: DASHBOARD_PATH },
  );
}
