// The Lua scripts, one file each in ./lua, named `<name>-<number of keys>.lua` with a header that
// says what KEYS and ARGV hold (BullMQ's src/commands/*.lua are the model). They are read from
// disk once per process (with their `--- @include` fragments) and defined on each connection that
// needs them, so ioredis sends EVALSHA and loads a script only when Redis does not know it yet.
import { readdirSync, readFileSync } from 'node:fs';
import type { RedisClient } from './connection.js';

const DIR = new URL('./lua/', import.meta.url);

export interface Script {
  numberOfKeys: number;
  lua: string;
}

let cache: Map<string, Script> | undefined;

/** Every script by name, its includes in place (the text Redis runs; the bench names EVALSHAs by it). */
export function luaScripts(): ReadonlyMap<string, Script> {
  if (cache) return cache;
  cache = new Map();
  for (const file of readdirSync(DIR)) {
    const match = /^([a-z-]+)-(\d+)\.lua$/.exec(file);
    if (!match) continue;
    cache.set(match[1]!, {
      numberOfKeys: Number(match[2]),
      lua: withIncludes(readFileSync(new URL(file, DIR), 'utf8'), file),
    });
  }
  return cache;
}

/**
 * A rule two scripts share lives once in ./lua/includes/<name>.lua and is pulled in with a line
 * `--- @include "<name>"` (BullMQ's convention), replaced by the fragment's text when loaded.
 */
function withIncludes(lua: string, file: string): string {
  return lua.replace(/^--- @include "([a-z-]+)"$/gm, (_, name: string) => {
    try {
      return readFileSync(new URL(`includes/${name}.lua`, DIR), 'utf8');
    } catch {
      throw new Error(`${file}: no Lua include ${name} in ${DIR.pathname}includes/`);
    }
  });
}

/** `pace-acquire` → `vqbPaceAcquire`: the command name the script gets on a connection. */
export function commandName(script: string): string {
  return `vqb${script.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase())}`;
}

type CamelCase<S extends string> = S extends `${infer H}-${infer T}`
  ? `${Capitalize<H>}${CamelCase<T>}`
  : Capitalize<S>;

/** A connection with the named scripts defined: `pace-acquire` is `vqbPaceAcquire(...keys, ...args)`. */
export type Scripted<T extends string> = RedisClient & {
  [K in T as `vqb${CamelCase<K>}`]: (...args: (string | number | Buffer)[]) => Promise<unknown>;
};

/** Defines the named scripts on `redis` (once per connection) and returns it typed with them. */
export function withScripts<const T extends string>(redis: RedisClient, names: readonly T[]): Scripted<T> {
  const all = luaScripts();
  for (const name of names) {
    const command = commandName(name);
    if (command in redis) continue;
    const script = all.get(name);
    if (!script) throw new Error(`no Lua script ${name} in ${DIR.pathname}`);
    redis.defineCommand(command, script);
  }
  return redis as Scripted<T>;
}
