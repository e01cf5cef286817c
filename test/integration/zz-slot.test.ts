import { Redis } from 'ioredis';
import { it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { AccountQueues } from '../../src/queue/account-queues.js';
import { AccountLine } from '../../src/queue/accounts.js';
import { VqbKeys } from '../../src/queue/keys.js';
it('slot', async () => {
  const config = loadConfig({ VQ_PREFIX: '{exp}', VQ_RATE_LIMIT: '200/s' });
  const redis = new Redis();
  const keys = new VqbKeys(config);
  const q = new AccountQueues(config, redis);
  const line = new AccountLine(config.accounts[0]!, q.for('default'), redis, keys, 25);
  await redis.del(keys.pace('default'));
  const t0 = performance.now();
  let reserved = 0, later = 0;
  while (performance.now() - t0 < 1000) {
    const s = await line.slot(40);
    if (s.reserved) reserved++;
    else { later++; await new Promise((r) => setTimeout(r, Math.max(1, s.waitMs - 40))); }
  }
  console.log({ reserved, later, interval: line.intervalMs });
  await q.close(); redis.disconnect();
});
