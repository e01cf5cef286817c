// The console's watch lists: the page, pause and resume (forms with the session's CSRF token),
// and a round's changes as CSV. A session sees only its token's accounts' watches.

import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.js';
import { writeChanges } from '../watch/changes-export.js';
import { Watches } from '../watch/watches.js';
import type { Kit } from './kit.js';
import { watchesPage } from './watch-page.js';

export function watchRoutes(scope: FastifyInstance, kit: Kit): void {
  const { services, config, required, checkCsrf, formCsrf, accountsOf, context, page } = kit;
  const watches = new Watches(services, scope.log as unknown as Logger);
  scope.addHook('onClose', async () => watches.close());

  scope.get('/watches', async (request, reply) => {
    const signed = await required(request);
    return page(reply, watchesPage(context(request, signed), await watches.list(accountsOf(signed.scope))));
  });

  scope.post<{ Params: { account: string; name: string; action: string } }>(
    '/watches/:account/:name/:action',
    async (request, reply) => {
      const signed = await required(request);
      checkCsrf(signed, formCsrf(request));
      const { account, name, action } = request.params;
      if (action !== 'pause' && action !== 'resume') throw new ApiError('NOT_FOUND', `no action ${action}`);
      const ref = await watches.find(name, accountsOf(signed.scope), account);
      if (action === 'pause') await watches.pause(ref);
      else await watches.resume(ref);
      request.log.info({ watch: name, account, via: 'console' }, `watch ${action}d by an operator`);
      return reply.redirect('/watches', 303);
    },
  );

  scope.get<{ Params: { account: string; name: string; round: string } }>(
    '/watches/:account/:name/changes/:round',
    async (request, reply) => {
      const signed = await required(request);
      const { account, name } = request.params;
      const ref = await watches.find(name, accountsOf(signed.scope), account);
      const round = Number(request.params.round);
      const { changes } = await watches.changes(ref, Number.isInteger(round) && round > 0 ? round : undefined);
      const out = new PassThrough();
      void writeChanges(out, changes, 'csv', config.csvDelimiter).catch((err: unknown) => out.destroy(err as Error));
      return reply
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="watch-${name}-${round}.changes.csv"`)
        .send(out);
    },
  );
}
