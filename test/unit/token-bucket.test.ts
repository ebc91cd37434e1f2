// The token bucket arithmetic with a controlled clock: no sleeps, exact figures.
import { describe, expect, it } from "vitest";
import { tokenBucketStep } from "../../src/limits/algorithms/token-bucket.js";
import type { TokenBucketSpec } from "../../src/limits/spec.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";

// The seed lab: capacity 10, refill 5/s.
const lab: TokenBucketSpec = { algorithm: "token_bucket", name: "lab.global", burst: 10, intervalMs: 200 };

function run(store: MemoryStore, nowMs: number, n: number, cost = 1) {
  return Array.from({ length: n }, () => store.checkSync([{ key: "k", spec: lab, cost }], nowMs));
}

describe("token bucket (GCRA)", () => {
  it("admits the burst, then denies with the time to the next token", () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const results = run(store, 1_000_000, 12);
    expect(results.filter((r) => r.allowed)).toHaveLength(10);
    expect(results[0]!.outcomes[0]).toEqual({ allowed: true, remaining: 9, resetMs: 200, retryAfterMs: 0 });
    expect(results[9]!.outcomes[0]).toMatchObject({ allowed: true, remaining: 0, resetMs: 2000 });
    expect(results[10]!.outcomes[0]).toEqual({
      allowed: false,
      remaining: 0,
      resetMs: 2000,
      retryAfterMs: 200,
    });
  });

  it("refills at the rate: 1 s later, 5 of 8 pass", () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    run(store, 1_000_000, 12);
    const later = run(store, 1_001_000, 8);
    expect(later.filter((r) => r.allowed)).toHaveLength(5);
    expect(later.slice(0, 5).every((r) => r.allowed)).toBe(true);
  });

  it("never exceeds the burst after a long idle time", () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    run(store, 0, 3);
    expect(run(store, 10_000_000, 12).filter((r) => r.allowed)).toHaveLength(10);
  });

  it("denies a cost larger than what is left, and takes nothing", () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    run(store, 0, 6); // 4 left
    const denied = store.checkSync([{ key: "k", spec: lab, cost: 5 }], 0);
    expect(denied.allowed).toBe(false);
    expect(denied.outcomes[0]).toMatchObject({ remaining: 4, retryAfterMs: 200 });
    expect(run(store, 0, 5).filter((r) => r.allowed)).toHaveLength(4);
  });

  it("decides several limits all or nothing", () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const small: TokenBucketSpec = { ...lab, name: "small", burst: 2 };
    const both = () =>
      store.checkSync(
        [
          { key: "big", spec: lab, cost: 1 },
          { key: "small", spec: small, cost: 1 },
        ],
        0,
      );
    expect(both().allowed).toBe(true);
    expect(both().allowed).toBe(true);
    const third = both();
    expect(third.allowed).toBe(false);
    expect(third.outcomes.map((o) => o.allowed)).toEqual([true, false]);
    // Nothing was consumed, so the big bucket reports the 8 it still has, not 7.
    expect(third.outcomes[0]).toEqual({ allowed: true, remaining: 8, resetMs: 400, retryAfterMs: 0 });
    // The big bucket was not charged for the denied request: 8 left.
    expect(store.checkSync([{ key: "big", spec: lab, cost: 8 }], 0).allowed).toBe(true);
    expect(store.checkSync([{ key: "big", spec: lab, cost: 1 }], 0).allowed).toBe(false);
  });

  it("handles intervals that are not exact in binary (3 per second)", () => {
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 3, intervalMs: 1000 / 3 };
    let tat: number | null = null;
    const allowed: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      const step = tokenBucketStep(tat, 0, spec, 1);
      allowed.push(step.outcome.allowed);
      if (step.outcome.allowed) tat = step.nextTat;
    }
    expect(allowed).toEqual([true, true, true, false]);
    expect(tokenBucketStep(tat, 1000, spec, 3).outcome.allowed).toBe(true);
  });

  it("sets a TTL of the time to full plus one second, and forgets idle keys", () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    run(store, 0, 10);
    expect(store.ttlMs("k", 0)).toBe(3000);
    expect(store.read("k", 3000)).toBeNull();
    expect(run(store, 3000, 11).filter((r) => r.allowed)).toHaveLength(10);
  });

  it("bounds its memory, dropping the least recently written key", () => {
    const store = new MemoryStore({ sweepIntervalMs: 0, maxKeys: 3 });
    for (const key of ["a", "b", "c", "a", "d"]) store.checkSync([{ key, spec: lab, cost: 1 }], 0);
    expect(store.size).toBe(3);
    expect(store.read("b", 0)).toBeNull();
    expect(store.read("a", 0)).not.toBeNull();
  });
});
