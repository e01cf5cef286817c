// MONITOR lines as Redis writes them (sdscatrepr quoting), read back into commands and arguments.
import { describe, expect, it } from 'vitest';
import { monitorArgs, monitorLine } from '../../bench/redis-monitor.js';

describe('MONITOR lines', () => {
  it('reads the time, the source and each quoted argument, escapes undone', () => {
    expect(
      monitorLine('+1795871646.055182 [0 lua] "HGET" "vqbtest-exposure:{vqb.seguros}:vqb:line" "upSince"'),
    ).toEqual({
      at: 1795871646055.182,
      source: 'lua',
      args: ['HGET', 'vqbtest-exposure:{vqb.seguros}:vqb:line', 'upSince'],
    });
    expect(monitorLine('+1.5 [0 127.0.0.1:34538] "get" "k"')?.source).toBe('127.0.0.1:34538');
    expect(monitorArgs(String.raw`"set" "a \"quoted\" \\ word" "\x00\xff\n"`)).toEqual([
      'set',
      'a "quoted" \\ word',
      '\x00\xff\n',
    ]);
  });

  it('is not fooled by other replies', () => {
    expect(monitorLine('+OK')).toBeUndefined();
    expect(monitorLine('-ERR nope')).toBeUndefined();
  });
});
