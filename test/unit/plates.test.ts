// Plates: what users type, what we send, and when two plates may be the same vehicle.
import { describe, expect, it } from 'vitest';
import { checkPlate, normalizePlate, toMercosul, vehicleKey } from '../../src/plates.js';

describe('normalizePlate', () => {
  it.each([
    ['ABC1D23', 'ABC1D23'],
    [' abc 1d23 ', 'ABC1D23'],
    ['ABC-1234', 'ABC1234'],
    ['abc-1234', 'ABC1234'],
    ['a.b/c_1\t2·3\u00a04', 'ABC1234'],
    ['ＡＢＣ１Ｄ２３', 'ABC1D23'], // full-width, as pasted from some spreadsheets
    ['ÁBÇ1D23', 'ABC1D23'], // accented look-alikes lose the accent instead of vanishing
    ['ábc1234', 'ABC1234'],
    ['', ''],
    ['---', ''],
  ])('%j → %j', (input, expected) => {
    expect(normalizePlate(input)).toBe(expected);
  });
});

describe('checkPlate', () => {
  it('accepts the old format', () => {
    expect(checkPlate('abc-1234')).toEqual({ ok: true, original: 'abc-1234', plate: 'ABC1234', format: 'old' });
  });

  it('accepts Mercosul', () => {
    expect(checkPlate(' ABC 1D23')).toEqual({ ok: true, original: ' ABC 1D23', plate: 'ABC1D23', format: 'mercosul' });
    expect(checkPlate('ＢＲＡ２Ｅ１９')).toMatchObject({ ok: true, plate: 'BRA2E19', format: 'mercosul' });
  });

  it('EMPTY when nothing is left, keeping the original', () => {
    expect(checkPlate('  - ')).toMatchObject({ ok: false, reason: 'EMPTY', original: '  - ', normalized: '' });
    expect(checkPlate('')).toMatchObject({ ok: false, reason: 'EMPTY', original: '' });
  });

  it('BAD_LENGTH when not 7 characters, saying how many', () => {
    const short = checkPlate('ab-123');
    expect(short).toMatchObject({ ok: false, reason: 'BAD_LENGTH', original: 'ab-123', normalized: 'AB123' });
    expect(!short.ok && short.message).toContain('5');
    expect(checkPlate('ABC12345')).toMatchObject({ ok: false, reason: 'BAD_LENGTH', normalized: 'ABC12345' });
  });

  it.each(['1234ABC', 'AB12345', 'ABCD123', 'ABC12D3', 'ABC1DD3', 'ABCDEFG', '1234567'])(
    'BAD_FORMAT for %j, keeping the original',
    (plate) => {
      const original = plate.toLowerCase();
      const check = checkPlate(original);
      expect(check).toMatchObject({ ok: false, reason: 'BAD_FORMAT', original, normalized: plate });
      expect(!check.ok && check.message).toContain('ABC1234');
    },
  );
});

describe('toMercosul', () => {
  it.each([
    ['ABC1034', 'ABC1A34'],
    ['ABC1134', 'ABC1B34'],
    ['ABC1234', 'ABC1C34'],
    ['ABC1334', 'ABC1D34'],
    ['ABC1434', 'ABC1E34'],
    ['ABC1534', 'ABC1F34'],
    ['ABC1634', 'ABC1G34'],
    ['ABC1734', 'ABC1H34'],
    ['ABC1834', 'ABC1I34'],
    ['ABC1934', 'ABC1J34'],
  ])('%s → %s', (old, mercosul) => {
    expect(toMercosul(old)).toBe(mercosul);
    expect(checkPlate(toMercosul(old))).toMatchObject({ ok: true, format: 'mercosul' });
  });

  it('leaves a Mercosul plate alone', () => {
    expect(toMercosul('ABC1D23')).toBe('ABC1D23');
  });

  it('refuses what is not an old-format plate', () => {
    expect(() => toMercosul('abc1234')).toThrow(RangeError);
    expect(() => toMercosul('ABC12')).toThrow(/old format/);
  });
});

describe('vehicleKey', () => {
  it('maps the old form and its Mercosul form to the same key', () => {
    expect(vehicleKey('ABC1234')).toBe('ABC1C34');
    expect(vehicleKey('ABC1C34')).toBe('ABC1C34');
    expect(vehicleKey('ABC1234')).toBe(vehicleKey('ABC1C34'));
  });

  it('keeps different vehicles apart', () => {
    expect(vehicleKey('ABC1234')).not.toBe(vehicleKey('ABC1D34'));
    expect(vehicleKey('ABC1234')).not.toBe(vehicleKey('ABD1234'));
  });
});
