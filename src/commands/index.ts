// The command table: name → module. Each command is a small module of its own, loaded when it is
// run: \`vqb check\` loads what a check needs, not the run's workers and exports (\`vqb --help\`
// loads them all, for their summaries).
import type { Command } from './command.js';

export const COMMAND_LOADERS: Record<string, () => Promise<Command>> = {
  run: async () => (await import('./run.js')).runCommand,
  demo: async () => (await import('./demo.js')).demoCommand,
  serve: async () => (await import('./serve.js')).serveCommand,
  work: async () => (await import('./work.js')).workCommand,
  simulate: async () => (await import('./simulate.js')).simulateCommand,
  status: async () => (await import('./status.js')).statusCommand,
  pause: async () => (await import('./pause.js')).pauseCommand,
  resume: async () => (await import('./pause.js')).resumeCommand,
  export: async () => (await import('./batch.js')).exportCommand,
  retry: async () => (await import('./batch.js')).retryCommand,
  check: async () => (await import('./check.js')).checkCommand,
  budget: async () => (await import('./budget.js')).budgetCommand,
  cost: async () => (await import('./budget.js')).costCommand,
  prune: async () => (await import('./retention.js')).pruneCommand,
  delete: async () => (await import('./retention.js')).deleteCommand,
  watch: async () => (await import('./watch.js')).watchCommand,
  migrate: async () => (await import('./migrate.js')).migrateCommand,
};

/** Every command, loaded (for \`vqb --help\` and the docs' checks). */
export async function loadCommands(): Promise<Record<string, Command>> {
  const entries = await Promise.all(
    Object.entries(COMMAND_LOADERS).map(async ([name, load]) => [name, await load()] as const),
  );
  return Object.fromEntries(entries);
}
