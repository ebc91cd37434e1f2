// Denial records in Redis: the log entry format existing data is written in, and the record
// check.lua is given, built once per route and list of limits.
import { describe, expect, it } from "vitest";
import type { LimitCheck, LimitSpec } from "../../src/limits/spec.js";
import { DenialTexts, decodeDenial, encodeDenial } from "../../src/limits/stores/redis/denial-codec.js";

const spec = (name: string): LimitSpec => ({ algorithm: "token_bucket", name, burst: 1, intervalMs: 1000 });
const checksOf = (...specs: LimitSpec[]): LimitCheck[] =>
  specs.map((s) => ({ key: s.name, spec: s, cost: 1 }));

describe("denial log entries", () => {
  it('are "<ms>\\t<route>\\t<a,b>", as check.lua writes them', () => {
    expect(encodeDenial({ atMs: 1_700_000_000_123.7, route: "login", limits: ["p.a", "p.b"] })).toBe(
      "1700000000123\tlogin\tp.a,p.b",
    );
    expect(decodeDenial("1700000000123\tlogin\tp.a,p.b")).toEqual({
      atMs: 1_700_000_000_123,
      route: "login",
      limits: ["p.a", "p.b"],
    });
    expect(decodeDenial("5\tr\t")).toEqual({ atMs: 5, route: "r", limits: [] });
    expect(decodeDenial("5")).toEqual({ atMs: 5, route: "", limits: [] });
  });
});

describe("DenialTexts", () => {
  const a = spec("p.a");
  const b = spec("p.b");
  const denial = (caller: string, route: string) => ({ logKey: "l", topKey: "t", caller, route });

  it('is "<caller>\\t<route>\\t<names…>" in the order of the checks', () => {
    const texts = new DenialTexts();
    expect(texts.text(denial("client:c1", "login"), checksOf(a, b))).toBe("client:c1\tlogin\tp.a\tp.b");
    expect(texts.text(denial("ip:10.0.0.1", "login"), checksOf(a, b))).toBe("ip:10.0.0.1\tlogin\tp.a\tp.b");
  });

  it("tells apart routes and lists of limits that share a first limit", () => {
    const texts = new DenialTexts();
    expect(texts.text(denial("c", "r1"), checksOf(a, b))).toBe("c\tr1\tp.a\tp.b");
    expect(texts.text(denial("c", "r2"), checksOf(a, b))).toBe("c\tr2\tp.a\tp.b");
    expect(texts.text(denial("c", "r1"), checksOf(a))).toBe("c\tr1\tp.a");
    expect(texts.text(denial("c", "r1"), checksOf(a, spec("p.b")))).toBe("c\tr1\tp.a\tp.b");
    expect(texts.text(denial("c", "r1"), checksOf(b, a))).toBe("c\tr1\tp.b\tp.a");
    expect(texts.text(denial("c", "r1"), [])).toBe("c\tr1");
  });

  it("stays right past its bound on the tails kept per first limit", () => {
    const texts = new DenialTexts();
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 100; i++)
        expect(texts.text(denial("c", `r${i}`), checksOf(a, b))).toBe(`c\tr${i}\tp.a\tp.b`);
    }
  });
});
