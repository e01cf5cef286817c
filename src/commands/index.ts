// The command table: name → module. Each command is a small module of its own.
import type { Command } from '../cli.js';
import { pauseCommand, resumeCommand } from './line.js';
import { simulateCommand } from './simulate.js';
import { statusCommand } from './status.js';
import { workCommand } from './work.js';

export const COMMANDS: Record<string, Command> = {
  simulate: simulateCommand,
  work: workCommand,
  status: statusCommand,
  pause: pauseCommand,
  resume: resumeCommand,
};
