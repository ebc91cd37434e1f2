// Denial records: the log entry format existing data is written in, and the limits a denial
// names (the store writes them after check.lua decided).
import { describe, expect, it } from "vitest";
import type { LimitCheck, LimitSpec } from "../../src/limits/spec.js";
import { deniedLimitNames } from "../../src/limits/stores/denial-queue.js";
import { decodeDenial, encodeDenial } from "../../src/limits/stores/redis/denial-codec.js";

const spec = (name: string): LimitSpec => ({ algorithm: "token_bucket", name, burst: 1, intervalMs: 1000 });
const checksOf = (...specs: LimitSpec[]): LimitCheck[] =>
  specs.map((s) => ({ key: s.name, spec: s, cost: 1 }));

describe("denial log entries", () => {
  it('are "<ms>\\t<route>\\t<a,b>"', () => {
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

describe("the limits a denial names", () => {
  const denied = { allowed: false, remaining: 0, resetMs: 5, retryAfterMs: 5 };
  const allowed = { allowed: true, remaining: 3, resetMs: 1, retryAfterMs: 0 };

  it("are those whose outcome denied, in the order of the request's checks", () => {
    const checks = checksOf(spec("p.a"), spec("p.b"), spec("p.c"));
    expect(deniedLimitNames(checks, [denied, allowed, denied])).toEqual(["p.a", "p.c"]);
    expect(deniedLimitNames(checks, [allowed, allowed, allowed])).toEqual([]);
  });

  it("never include a shadow limit, which reports a denial but never denies", () => {
    const checks = checksOf({ ...spec("p.shadow"), shadow: true }, spec("p.real"));
    expect(deniedLimitNames(checks, [denied, denied])).toEqual(["p.real"]);
  });
});
