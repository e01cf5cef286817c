// The command table: name → its summary and its module. Each command is a small module of its own,
// loaded when it is run: `vqb check` loads what a check needs, not the run's workers and exports.
// The summaries are here, not in the modules, so `vqb --help` loads none of them: loading them
// all for their summaries took 1.03 s of a 2-core machine's wall clock.
import type { Command } from './command.js';

/** A command's one line in `vqb --help`, and its module, loaded when it is run. */
export interface CommandEntry {
  summary: string;
  load: () => Promise<Command>;
}

export const COMMANDS: Record<string, CommandEntry> = {
  run: {
    summary: 'the main job: enqueue a CSV or .xlsx of plates, work it here with progress, write the exports',
    load: async () => (await import('./run.js')).runCommand,
  },
  demo: {
    summary: 'run a sample batch (samples/plates.csv) against a local simulator, end to end',
    load: async () => (await import('./demo.js')).demoCommand,
  },
  serve: {
    summary:
      'the HTTP API, the web console, the drop folder, /metrics and the queue dashboard (optionally workers too)',
    load: async () => (await import('./serve.js')).serveCommand,
  },
  work: {
    summary: 'run workers only (start any number, on any number of machines; they share the limit)',
    load: async () => (await import('./work.js')).workCommand,
  },
  simulate: {
    summary: 'run the upstream simulator (a real HTTP server with the contract, limits and faults)',
    load: async () => (await import('./simulate.js')).simulateCommand,
  },
  status: {
    summary: "show each account's line (running? paused, why? holding until when?), the queues, and batches",
    load: async () => (await import('./status.js')).statusCommand,
  },
  pause: {
    summary: 'pause every worker of one account, or of all (running requests finish; nothing is lost)',
    load: async () => (await import('./pause.js')).pauseCommand,
  },
  resume: {
    summary: 'resume one account, or all, after a pause or a key failure (rotate the key first)',
    load: async () => (await import('./pause.js')).resumeCommand,
  },
  export: {
    summary: "write (or rebuild) a batch's exports from the stored outcomes",
    load: async () => (await import('./batch.js')).exportCommand,
  },
  retry: {
    summary: "run a batch's failed plates again (polls paid queries; --recreate pays again)",
    load: async () => (await import('./batch.js')).retryCommand,
  },
  check: {
    summary: 'check each account’s key without a charge (or, with --create PLATE, one paid create shown raw)',
    load: async () => (await import('./check.js')).checkCommand,
  },
  budget: {
    summary: 'show or change spending caps (per batch, per day, per month); raising one continues the work',
    load: async () => (await import('./budget.js')).budgetCommand,
  },
  cost: {
    summary: 'cost report per UTC day: creates, polls, 429s, reused, possible duplicate charges',
    load: async () => (await import('./budget.js')).costCommand,
  },
  prune: {
    summary: 'archive finished batches older than VQ_RETAIN (or --older-than) and delete them from Redis',
    load: async () => (await import('./retention.js')).pruneCommand,
  },
  delete: {
    summary: 'archive one batch and delete it from Redis (refused while it runs, unless --cancel)',
    load: async () => (await import('./retention.js')).deleteCommand,
  },
  watch: {
    summary: 'watch lists: re-check plates on a schedule and report only what changed',
    load: async () => (await import('./watch.js')).watchCommand,
  },
  migrate: {
    summary: "move the Redis data of an older vqb to this version's key layout (once, every vqb process stopped)",
    load: async () => (await import('./migrate.js')).migrateCommand,
  },
};
