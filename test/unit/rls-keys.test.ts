// Where the rate-limit service keeps a descriptor's counter: distinct descriptors never share a
// key (whatever `=`, `:`, `{` or `#` their keys and values hold), one domain is one hash tag,
// and a long value makes a key of bounded length.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { stateKey } from "../../src/rls/decide.js";

const entriesOf = (pairs: [string, string][]) => pairs.map(([key, value]) => ({ key, value }));
const keyOf = (domain: string, pairs: [string, string][]) =>
  stateKey(
    "t:",
    domain,
    entriesOf(pairs),
    pairs.map((p) => p[1]),
    "minute",
  );

describe("rls state keys", () => {
  it("are one-to-one over domains, keys and values", () => {
    const text = fc.string({
      unit: fc.constantFrom("a", "=", ":", "{", "}", "#", "%", " ", "b", "é", "\u0000", "\u0301"),
      maxLength: 6,
    });
    const descriptor = fc.tuple(text, fc.array(fc.tuple(text, text), { minLength: 1, maxLength: 3 }));
    fc.assert(
      fc.property(descriptor, descriptor, ([d1, p1], [d2, p2]) => {
        const same = d1 === d2 && JSON.stringify(p1) === JSON.stringify(p2);
        expect(keyOf(d1, p1) === keyOf(d2, p2)).toBe(same);
      }),
      { numRuns: 2000 },
    );
  });

  it("hold printable ASCII only: control bytes and non-ASCII values are hashed", () => {
    const key = keyOf("edge", [
      ["user", "a\u0000b"],
      ["name", "Zoë"],
    ]);
    expect(key).toMatch(/^[\x20-\x7e]+$/);
    expect(key).toMatch(/^t:\{rls:edge\}:user=#[\w-]{22}:name=#[\w-]{22}:minute$/);
  });

  it("keep a domain's counters under one hash tag, the unit last", () => {
    expect(keyOf("edge", [["remote_address", "10.0.0.1"]])).toBe(
      "t:{rls:edge}:remote_address=10.0.0.1:minute",
    );
    expect(keyOf("a:b", [["k", "x=y"]])).toBe("t:{rls:a%3ab}:k=x%3dy:minute");
  });

  it("hash a long value", () => {
    expect(keyOf("edge", [["path", "/".repeat(10_000)]]).length).toBeLessThan(80);
  });
});
