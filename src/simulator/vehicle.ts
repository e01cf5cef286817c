// Fake but plausible vehicle data, a pure function of the plate: the same plate always gives the
// same vehicle, and the old and Mercosul forms of a plate give the same vehicle too.
import { vehicleKey } from '../plates.js';

export interface FakeVehicle {
  plate: string;
  brand: string;
  model: string;
  year: number;
  modelYear: number;
  color: string;
  fuel: string;
  city: string;
  uf: string;
  /** Masked as the provider shows it: first 3 and last 4 characters of the VIN. */
  chassis: string;
  /** Masked: last 4 digits only. */
  renavam: string;
  situation: string;
  restrictions: string[];
}

const MODELS: ReadonlyArray<readonly [string, string]> = [
  ['VOLKSWAGEN', 'GOL 1.0'],
  ['VOLKSWAGEN', 'POLO TSI'],
  ['VOLKSWAGEN', 'T-CROSS 200 TSI'],
  ['VOLKSWAGEN', 'SAVEIRO CS'],
  ['FIAT', 'UNO MILLE'],
  ['FIAT', 'PALIO FIRE'],
  ['FIAT', 'STRADA FREEDOM'],
  ['FIAT', 'ARGO DRIVE 1.0'],
  ['FIAT', 'TORO VOLCANO'],
  ['CHEVROLET', 'ONIX 1.0 LT'],
  ['CHEVROLET', 'PRISMA 1.4'],
  ['CHEVROLET', 'S10 LTZ'],
  ['CHEVROLET', 'CELTA LIFE'],
  ['FORD', 'KA SE 1.0'],
  ['FORD', 'FIESTA 1.6'],
  ['FORD', 'RANGER XLS'],
  ['FORD', 'ECOSPORT FREESTYLE'],
  ['TOYOTA', 'COROLLA XEI'],
  ['TOYOTA', 'HILUX SRV'],
  ['TOYOTA', 'ETIOS HB X'],
  ['HONDA', 'CIVIC EXL'],
  ['HONDA', 'FIT LX'],
  ['HONDA', 'CG 160 FAN'],
  ['YAMAHA', 'FAZER 250'],
  ['HYUNDAI', 'HB20 COMFORT'],
  ['HYUNDAI', 'CRETA ATTITUDE'],
  ['RENAULT', 'SANDERO EXPRESSION'],
  ['RENAULT', 'KWID ZEN'],
  ['JEEP', 'RENEGADE LONGITUDE'],
  ['NISSAN', 'KICKS SV'],
];
const COLORS = ['BRANCA', 'PRATA', 'PRETA', 'CINZA', 'VERMELHA', 'AZUL', 'VERDE', 'BEGE', 'AMARELA', 'MARROM'];
const FUELS = ['ALCOOL/GASOLINA', 'ALCOOL/GASOLINA', 'ALCOOL/GASOLINA', 'GASOLINA', 'DIESEL', 'ALCOOL'];
const CITIES: ReadonlyArray<readonly [string, string]> = [
  ['SAO PAULO', 'SP'],
  ['CAMPINAS', 'SP'],
  ['RIO DE JANEIRO', 'RJ'],
  ['NITEROI', 'RJ'],
  ['BELO HORIZONTE', 'MG'],
  ['UBERLANDIA', 'MG'],
  ['CURITIBA', 'PR'],
  ['LONDRINA', 'PR'],
  ['PORTO ALEGRE', 'RS'],
  ['FLORIANOPOLIS', 'SC'],
  ['SALVADOR', 'BA'],
  ['RECIFE', 'PE'],
  ['FORTALEZA', 'CE'],
  ['GOIANIA', 'GO'],
  ['BRASILIA', 'DF'],
  ['MANAUS', 'AM'],
  ['BELEM', 'PA'],
  ['VITORIA', 'ES'],
  ['CAMPO GRANDE', 'MS'],
  ['NATAL', 'RN'],
];
const SITUATIONS = [
  'EM CIRCULACAO',
  'EM CIRCULACAO',
  'EM CIRCULACAO',
  'EM CIRCULACAO',
  'EM CIRCULACAO',
  'EM CIRCULACAO',
  'EM CIRCULACAO',
  'BAIXADO',
  'ROUBO/FURTO',
];
const RESTRICTIONS = ['ALIENACAO FIDUCIARIA', 'RESTRICAO JUDICIAL', 'RESTRICAO ADMINISTRATIVA'];
const VIN_CHARS = 'ABCDEFGHJKLMNPRSTUVWXYZ0123456789';

/** FNV-1a over the string: a stable 32-bit seed. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32: a tiny seeded generator, good enough for fake data and for seeded test runs. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** `plate` must be a valid normalised plate. */
export function fakeVehicle(plate: string): FakeVehicle {
  const random = seededRandom(hashString(vehicleKey(plate)));
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const [brand, model] = pick(MODELS);
  const [city, uf] = pick(CITIES);
  const year = 1995 + Math.floor(random() * 30);
  const modelYear = year + (random() < 0.5 ? 0 : 1);
  let vin = '9B';
  for (let i = 0; i < 15; i += 1) vin += pick(VIN_CHARS.split(''));
  const renavamTail = String(Math.floor(random() * 10_000)).padStart(4, '0');
  const restrictions = random() < 0.15 ? [pick(RESTRICTIONS)] : [];
  return {
    plate,
    brand,
    model,
    year,
    modelYear,
    color: pick(COLORS),
    fuel: pick(FUELS),
    city,
    uf,
    chassis: `${vin.slice(0, 3)}**********${vin.slice(-4)}`,
    renavam: `*******${renavamTail}`,
    situation: pick(SITUATIONS),
    restrictions,
  };
}
