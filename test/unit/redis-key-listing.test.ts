// What the Redis key listing computes before it asks anything (stores/redis/key-listing.ts): a
// MATCH pattern that matches only the prefix, and the one slot a prefix with a hash tag lies in.
import calculateSlot from "cluster-key-slot";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { commonPrefix, globEscape, prefixSlot } from "../../src/limits/stores/redis/key-listing.js";

/**
 * What Redis's glob (stringmatchlen) reads in a pattern made of escaped text and a final `*`: a
 * backslash makes the next character literal; an unescaped `*`, `?`, `[` or `]` would match more.
 */
function literalBeforeStar(pattern: string): string {
  expect(pattern.endsWith("*")).toBe(true);
  let literal = "";
  for (let i = 0; i < pattern.length - 1; i++) {
    const c = pattern[i]!;
    if (c === "\\") literal += pattern[++i];
    else if ("*?[]".includes(c)) throw new Error(`unescaped ${c} in ${pattern}`);
    else literal += c;
  }
  return literal;
}

describe("globEscape", () => {
  it("escapes *, ?, [, ] and \\, and nothing else", () => {
    expect(globEscape("tg:{c:a*b?[c]\\d}:")).toBe("tg:{c:a\\*b\\?\\[c\\]\\\\d}:");
    expect(globEscape("tg:{t:acme}:c:bob:free.models:")).toBe("tg:{t:acme}:c:bob:free.models:");
  });

  it("the escaped prefix then * matches the prefix itself, literally", () => {
    const text = fc.string({ unit: fc.constantFrom("a", "*", "?", "[", "]", "\\", "{", "}", ":", "^", "-") });
    fc.assert(
      fc.property(text, (prefix) => {
        expect(literalBeforeStar(`${globEscape(prefix)}*`)).toBe(prefix);
      }),
    );
  });
});

describe("prefixSlot", () => {
  it("a prefix holding a whole hash tag: the slot of every key under it", () => {
    expect(prefixSlot("tg:{c:bob}:")).toBe(calculateSlot("{c:bob}"));
    expect(prefixSlot("tg:{t:acme}:c:bob:free.models:")).toBe(calculateSlot("tg:{t:acme}:anything"));
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }).filter((t) => !t.includes("}")),
        fc.string(),
        (tag, rest) => {
          const prefix = `p:{${tag}}:`;
          expect(prefixSlot(prefix)).toBe(calculateSlot(prefix + rest));
        },
      ),
    );
  });

  it("no slot when the tag is open, empty or absent: such keys may hash anywhere", () => {
    expect(prefixSlot("tg:")).toBeUndefined();
    expect(prefixSlot("tg:{c:bo")).toBeUndefined();
    expect(prefixSlot("tg:{}:x")).toBeUndefined();
  });
});

describe("commonPrefix", () => {
  it("is the longest start every text shares", () => {
    expect(commonPrefix(["tg:{t:acme}:c:bob:m:", "tg:{t:acme}:x:"])).toBe("tg:{t:acme}:");
    expect(commonPrefix(["a"])).toBe("a");
    expect(commonPrefix(["ab", "cd"])).toBe("");
  });
});
