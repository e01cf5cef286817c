import { SIMULATOR_USAGE } from '../simulator/index.js';
import { runSimulate } from '../simulator/main.js';
import type { Command } from './command.js';

export const simulateCommand: Command = {
  handlesStop: true,
  usage: SIMULATOR_USAGE,
  rawArgs: true,
  async run(ctx) {
    const handle = await runSimulate(ctx.args, (text) => void ctx.io.stdout.write(text));
    await ctx.io.stopSignal;
    await handle.close();
    return 0;
  },
};
