// `vqb migrate`: the numbered migrations of the Redis data, run once by an operator, never by a
// start (a start that finds data of an older layout refuses with LAYOUT_MIGRATION_NEEDED). One so
// far: 1, vqb 0.1.0's single-slot key layout to one slot per account (redis/layout.ts).
import { waitForRedisAtStart } from '../redis/connection.js';
import { migrateAtCommand } from '../redis/layout.js';
import type { Command } from './command.js';

export const migrateCommand: Command = {
  usage: `vqb migrate
  Migration 1: vqb 0.1.0 kept every key in one slot; this version keeps each account's keys in its
  own. Stop every vqb process first. The move copies each key, then deletes the old one, under a
  lock in Redis: cut off anywhere, run it again and it goes on. Nothing to move: says so.`,
  options: {},
  async run(ctx) {
    const config = ctx.config();
    const logger = ctx.logger(config);
    if (!(await waitForRedisAtStart(config, logger, ctx.io.stopSignal))) return 0;
    const result = await migrateAtCommand(config, logger);
    ctx.print(
      result.alreadyCurrent || result.moved === 0
        ? 'the Redis data is in key layout 2 already: nothing to move'
        : `moved ${result.moved} keys to key layout 2 (one slot per account): start vqb as before`,
    );
    return 0;
  },
};
