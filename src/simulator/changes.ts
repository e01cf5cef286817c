// Answers that change between rounds, for watch lists: an admin call picks a share of the plates
// the simulator has answered (or the plates it is given) and gives each a new restriction or a
// new owner, so later answers for that vehicle differ in exactly that field. Every change is
// kept with the field it touched, so a test or the bench can count what a watch found against
// what changed. The vehicle itself stays a pure function of the plate; this is an overlay on it.
import { vehicleKey } from '../plates.js';
import type { FakeVehicle } from './vehicle.js';

const NEW_RESTRICTIONS = ['RESTRICAO JUDICIAL', 'ALIENACAO FIDUCIARIA', 'RESTRICAO ADMINISTRATIVA', 'RENAJUD'];
const OWNERS = ['MARIA SILVA', 'JOAO SOUZA', 'ANA OLIVEIRA', 'PEDRO SANTOS', 'LUCIA PEREIRA', 'CARLOS LIMA'];

export type ChangedField = 'restrictions' | 'owner';

export interface VehicleChange {
  plate: string;
  field: ChangedField;
  before: string;
  after: string;
  /** Which call made it (1, 2, …). */
  generation: number;
}

interface Overlay {
  restrictions?: string[];
  owner?: string;
  owners: number;
}

export class VehicleChanges {
  readonly #overlay = new Map<string, Overlay>();
  readonly #log: VehicleChange[] = [];
  #generation = 0;

  /** The vehicle as answered now: the plate's own, with what changed since laid over it. */
  apply(vehicle: FakeVehicle): FakeVehicle & { owner?: string } {
    const o = this.#overlay.get(vehicleKey(vehicle.plate));
    if (o === undefined) return vehicle;
    return {
      ...vehicle,
      ...(o.restrictions !== undefined ? { restrictions: o.restrictions } : {}),
      ...(o.owner !== undefined ? { owner: o.owner } : {}),
    };
  }

  /**
   * Changes `share` of `candidates` (each once, chosen with `random`), or every plate of `plates`
   * when given: half a new restriction, half a new owner. Returns this call's changes.
   */
  change(
    base: (plate: string) => FakeVehicle,
    candidates: readonly string[],
    options: { share?: number; plates?: readonly string[] },
    random: () => number,
  ): VehicleChange[] {
    this.#generation += 1;
    let chosen: string[];
    if (options.plates !== undefined) chosen = [...new Set(options.plates)];
    else {
      const pool = [...new Set(candidates)];
      const count = Math.round(pool.length * (options.share ?? 0.1));
      for (let i = pool.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [pool[i], pool[j]] = [pool[j]!, pool[i]!];
      }
      chosen = pool.slice(0, count);
    }
    const made: VehicleChange[] = [];
    for (const plate of chosen) {
      const now = this.apply(base(plate));
      const key = vehicleKey(plate);
      const o = this.#overlay.get(key) ?? { owners: 0 };
      const restrictions = now.restrictions;
      const fresh = NEW_RESTRICTIONS.find((r) => !restrictions.includes(r));
      if (random() < 0.5 && fresh !== undefined) {
        o.restrictions = [...restrictions, fresh];
        made.push(this.#note(plate, 'restrictions', JSON.stringify(restrictions), JSON.stringify(o.restrictions)));
      } else {
        o.owners += 1;
        const before = now.owner ?? '';
        o.owner = `${OWNERS[(o.owners + Math.floor(random() * OWNERS.length)) % OWNERS.length]} ${o.owners}`;
        made.push(this.#note(plate, 'owner', before, o.owner));
      }
      this.#overlay.set(key, o);
    }
    return made;
  }

  #note(plate: string, field: ChangedField, before: string, after: string): VehicleChange {
    const change = { plate, field, before, after, generation: this.#generation };
    this.#log.push(change);
    return change;
  }

  /** Every change made, oldest first. */
  log(): readonly VehicleChange[] {
    return this.#log;
  }
}
