// Which limit the single-limit header styles (draft, legacy) describe.
import { describe, expect, it } from "vitest";
import { mostRestrictive, rateLimitHeaders } from "../../src/http/ratelimit-headers.js";
import type { AppliedLimit } from "../../src/limits/decision.js";
import type { LimitOutcome, LimitSpec } from "../../src/limits/spec.js";

function applied(
  name: string,
  quota: number,
  outcome: LimitOutcome,
  spec?: Partial<LimitSpec>,
): AppliedLimit {
  const s = { algorithm: "fixed_window", name, limit: quota, windowMs: 60_000, ...spec } as LimitSpec;
  return {
    spec: s,
    limit: { spec: s, description: name, quota, windowSeconds: 60 },
    outcome,
  };
}

describe("mostRestrictive", () => {
  it("on a denial describes the limit that refused, not one with fewer units left", () => {
    // A token budget refused under max_cost (3000 tokens left) beside a request rate with 18.
    const budget = applied("team.tenant", 100_000, {
      allowed: false,
      remaining: 3000,
      resetMs: 2_600_000_000,
      retryAfterMs: 2_600_000_000,
    });
    const rate = applied("team.global", 20, { allowed: true, remaining: 18, resetMs: 2000, retryAfterMs: 0 });
    expect(mostRestrictive([rate, budget])).toBe(budget);
    const headers = rateLimitHeaders([rate, budget], { draft: true, ietf: false, legacy: false }, 0);
    expect(headers).toMatchObject({
      "ratelimit-limit": "100000",
      "ratelimit-remaining": "3000",
      "ratelimit-reset": "2600000",
    });
  });

  it("among denials, the longest wait; among admissions, the fewest left, then the longest reset", () => {
    const short = applied("a", 10, { allowed: false, remaining: 0, resetMs: 1000, retryAfterMs: 1000 });
    const long = applied("b", 10, { allowed: false, remaining: 4, resetMs: 9000, retryAfterMs: 9000 });
    expect(mostRestrictive([short, long])).toBe(long);
    const few = applied("c", 10, { allowed: true, remaining: 1, resetMs: 100, retryAfterMs: 0 });
    const tieLonger = applied("d", 10, { allowed: true, remaining: 1, resetMs: 900, retryAfterMs: 0 });
    const many = applied("e", 10, { allowed: true, remaining: 8, resetMs: 5000, retryAfterMs: 0 });
    expect(mostRestrictive([many, few, tieLonger])).toBe(tieLonger);
  });
});
