// The command table: name → module. Each command is a small module of its own.

import { exportCommand, retryCommand } from './batch.js';
import { budgetCommand, costCommand } from './budget.js';
import { checkCommand } from './check.js';
import type { Command } from './command.js';
import { demoCommand } from './demo.js';
import { pauseCommand, resumeCommand } from './pause.js';
import { deleteCommand, pruneCommand } from './retention.js';
import { runCommand } from './run.js';
import { serveCommand } from './serve.js';
import { simulateCommand } from './simulate.js';
import { statusCommand } from './status.js';
import { watchCommand } from './watch.js';
import { workCommand } from './work.js';

export const COMMANDS: Record<string, Command> = {
  run: runCommand,
  demo: demoCommand,
  serve: serveCommand,
  work: workCommand,
  simulate: simulateCommand,
  status: statusCommand,
  pause: pauseCommand,
  resume: resumeCommand,
  export: exportCommand,
  retry: retryCommand,
  check: checkCommand,
  budget: budgetCommand,
  cost: costCommand,
  prune: pruneCommand,
  delete: deleteCommand,
  watch: watchCommand,
};
