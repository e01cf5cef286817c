// How paid results are packed for Redis: JSON, deflated (zlib deflateRaw) against a preset
// dictionary of the field names and common values of an outcome and of the vehicle API's answer.
// Measured on simulator answers (bench `--only finished`): an outcome's JSON is about 590 bytes
// and its hash entry about 700; deflate alone makes it 376 bytes (the answer is too short for
// deflate to find repeats in itself); with the dictionary it is about 150. msgpack (msgpackr,
// which bullmq uses) only saves the quotes and separators: 518 bytes, and about the same as this
// once deflated, for a dependency we would have to add; zlib is built in.
//
// The first byte is the format: `{` is the plain JSON stored before this module existed, read as
// it always was; 0x01 is deflate with DICTIONARY_V1. The dictionary may never change: a new one
// is a new format byte, and the old one stays here to read what was written with it.
import { deflateRawSync, inflateRawSync } from 'node:zlib';

const FORMAT_V1 = 0x01;
const JSON_OPEN = 0x7b; // '{'

/**
 * Deflate finds repeats up to 32 KB back, the dictionary included; strings near the end are the
 * cheapest to refer to, so the most common ones come last.
 */
const DICTIONARY_V1 = Buffer.from(
  [
    '"restrictions":["ALIENACAO FIDUCIARIA"],"situation":"EM CIRCULACAO","BAIXADO","ROUBO/FURTO",',
    '"renavam":"*******","chassis":"9BW**********","uf":"SP","RJ","MG","PR","RS","SC","BA","GO","DF",',
    '"city":"SAO PAULO","RIO DE JANEIRO","BELO HORIZONTE","CURITIBA","PORTO ALEGRE",',
    '"fuel":"ALCOOL/GASOLINA","GASOLINA","DIESEL","FLEX","color":"BRANCA","PRATA","PRETA","CINZA","VERMELHA",',
    '"brand":"VOLKSWAGEN","CHEVROLET","FIAT","FORD","TOYOTA","HONDA","HYUNDAI","RENAULT","model":"',
    '"modelYear":20,"year":20,"plate":"',
    '{"code":"VEHICLE_NOT_FOUND","message":"No vehicle found for plate ","httpStatus":},',
    '"error":{"code":"POLL_TIMEOUT","message":"","reused":true,"reusedAgeMs":,"possibleDuplicate":true,',
    '"status":"failed","at":17,"attempts":1,"polls":1,"requests":2,"finishedAt":17,"createdAt":17,"enqueuedAt":17,',
    '"completedAt":"2026-01-01T00:00:00.000Z","createdAt":"2026-01-01T00:00:00.000Z","licensePlate":"',
    '"status":"COMPLETED","result":{"id":"","status":"done","queryId":"","result":{"',
  ].join(''),
);

/**
 * zlib's output buffer, allocated anew for every call: its default (16 KB) was half the CPU of a
 * pack in a fresh worker (300 outcomes: 196-226 µs a pack, 108-130 with 1 KB). Packed outcomes are
 * about 150 bytes; a larger one takes more chunks, joined, the same bytes.
 */
const CHUNK_BYTES = 1024;

/** Packs a JSON value: format byte, then its JSON deflated against the dictionary. */
export function pack(value: unknown): Buffer {
  const body = deflateRawSync(Buffer.from(JSON.stringify(value)), {
    dictionary: DICTIONARY_V1,
    level: 9,
    chunkSize: CHUNK_BYTES,
  });
  const out = Buffer.allocUnsafe(body.length + 1);
  out[0] = FORMAT_V1;
  body.copy(out, 1);
  return out;
}

/** Reads what `pack` wrote, or the plain JSON stored before it (first byte `{`). */
export function unpack(raw: Buffer): unknown {
  if (raw[0] === JSON_OPEN) return JSON.parse(raw.toString('utf8'));
  if (raw[0] === FORMAT_V1)
    return JSON.parse(inflateRawSync(raw.subarray(1), { dictionary: DICTIONARY_V1 }).toString('utf8'));
  throw new Error(`stored value of unknown format 0x${(raw[0] ?? 0).toString(16)}`);
}
