// Constants written in both languages: the Lua scripts (lua/) and the TypeScript that sends
// their arguments, reads their replies or runs the same arithmetic in-process. Each pair is read
// from the sources, so changing one side alone fails here rather than in a Redis conformance run.
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { STATE_TTL_SLACK_MS } from "../../src/limits/algorithms/algorithm.js";
import { CONCURRENCY_RETRY_CAP_MS } from "../../src/limits/algorithms/concurrency.js";
import { ALGORITHMS } from "../../src/limits/algorithms/index.js";
import { EPSILON_MS } from "../../src/limits/algorithms/token-bucket.js";
import { LUA_DIR, SHADOW_FLAG } from "../../src/limits/stores/redis/scripts.js";

const lua = (file: string) => readFileSync(LUA_DIR + file, "utf8");

/** The value of `local NAME = <number>` in a Lua file. */
function luaConstant(file: string, name: string): number {
  const match = new RegExp(`^local ${name} = ([0-9.e+-]+)\\s*$`, "m").exec(lua(file));
  if (!match) throw new Error(`lua/${file} has no "local ${name} = <number>"`);
  return Number(match[1]);
}

/** Every `ALGORITHMS[<code>] = { … }` registration of every lua/ file. */
function luaRegistrations(): { code: number; file: string; holdsSlot: boolean }[] {
  return readdirSync(LUA_DIR)
    .filter((f) => f.endsWith(".lua"))
    .flatMap((file) =>
      [...lua(file).matchAll(/^ALGORITHMS\[(\d+)\] = \{(.*)\}$/gm)].map((m) => ({
        code: Number(m[1]),
        file,
        holdsSlot: /\bholds_slot = true\b/.test(m[2]!),
      })),
    );
}

describe("the constants of the Lua scripts and the TypeScript agree", () => {
  it("each algorithm's code is registered by its own Lua file, and no other code is", () => {
    const expected = Object.values(ALGORITHMS).map((a) => `${a.code} in ${a.luaFile}`);
    expect(
      luaRegistrations()
        .map((r) => `${r.code} in ${r.file}`)
        .sort(),
    ).toEqual(expected.sort());
  });

  it("an algorithm a post-charge leaves alone holds a slot on both sides", () => {
    const byCode = new Map(luaRegistrations().map((r) => [r.code, r.holdsSlot]));
    for (const [name, algorithm] of Object.entries(ALGORITHMS)) {
      expect(byCode.get(algorithm.code), name).toBe(algorithm.charge === undefined);
    }
  });

  it("codes are distinct and below the shadow flag, which both sides spell the same", () => {
    const codes = Object.values(ALGORITHMS).map((a) => a.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toBeGreaterThan(0);
    for (const code of codes) expect(code).toBeLessThan(SHADOW_FLAG);
    expect(luaConstant("check.lua", "SHADOW")).toBe(SHADOW_FLAG);
  });

  it("the arithmetic's own constants", () => {
    expect(luaConstant("prelude.lua", "STATE_TTL_SLACK_MS")).toBe(STATE_TTL_SLACK_MS);
    expect(luaConstant("token_bucket.lua", "EPSILON_MS")).toBe(EPSILON_MS);
    expect(luaConstant("concurrency.lua", "CONCURRENCY_RETRY_CAP_MS")).toBe(CONCURRENCY_RETRY_CAP_MS);
  });

  it("reads what it checks: a constant that is not there fails, not passes", () => {
    expect(() => luaConstant("check.lua", "NO_SUCH_CONSTANT")).toThrow(/has no/);
  });
});
