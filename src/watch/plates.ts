// The plates of a watch list, from a file (CSV or .xlsx, read as `vqb run` reads one) or a list:
// normalised, checked, each once. What is not a plate is counted and named, never watched.

import { checkPlate } from '../plates.js';
import { plateFileFormat, readPlateFile } from '../producers/plate-file.js';

export interface WatchPlates {
  plates: string[];
  /** Inputs that are not plates (the first few, for the message). */
  invalid: string[];
  invalidCount: number;
}

export function checkWatchPlates(inputs: Iterable<string>): WatchPlates {
  const plates = new Set<string>();
  const invalid: string[] = [];
  let invalidCount = 0;
  for (const input of inputs) {
    const check = checkPlate(input);
    if (check.ok) plates.add(check.plate);
    else {
      invalidCount += 1;
      if (invalid.length < 5) invalid.push(input);
    }
  }
  return { plates: [...plates], invalid, invalidCount };
}

export async function readWatchFile(path: string): Promise<WatchPlates> {
  const { rows } = await readPlateFile(path, await plateFileFormat(path));
  const inputs: string[] = [];
  for await (const row of rows) inputs.push(row.input);
  return checkWatchPlates(inputs);
}
