// Stand-alone entry: `node dist/src/simulator/main.js [flags]` runs the simulator until SIGINT or
// SIGTERM, the same as `vqb simulate`. The CLI may call runSimulate directly.
import { pathToFileURL } from 'node:url';
import { isVqbError } from '../errors.js';
import { formatBanner, parseSimulatorArgs, type SimulatorHandle, startSimulator } from './index.js';

export async function runSimulate(
  argv: string[],
  write: (text: string) => void = (t) => process.stdout.write(t),
): Promise<SimulatorHandle> {
  const handle = await startSimulator(parseSimulatorArgs(argv));
  write(`${formatBanner(handle)}\n`);
  return handle;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runSimulate(process.argv.slice(2)).then(
    (handle) => {
      const stop = () => void handle.close().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    },
    (error: unknown) => {
      process.stderr.write(`${isVqbError(error) ? error.message : String((error as Error).stack ?? error)}\n`);
      process.exit(isVqbError(error) && error.code === 'USAGE' ? 2 : 1);
    },
  );
}
