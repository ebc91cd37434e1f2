// The deny cache never denies what the store would allow. For random request sequences over
// every cacheable algorithm (random costs, time moving on, several limits per request), each
// local denial is checked against the store's own arithmetic at that instant, read-only.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ALGORITHMS } from "../../src/limits/algorithms.js";
import { DenyCache } from "../../src/limits/deny-cache.js";
import type { LimitCheck, LimitSpec } from "../../src/limits/spec.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";

const specArb: fc.Arbitrary<LimitSpec> = fc.oneof(
  fc
    .record({ burst: fc.integer({ min: 1, max: 8 }), ms: fc.integer({ min: 50, max: 500 }) })
    .map((s): LimitSpec => ({ algorithm: "token_bucket", name: "tb", burst: s.burst, intervalMs: s.ms })),
  fc
    .record({
      algorithm: fc.constantFrom(
        "fixed_window" as const,
        "sliding_window" as const,
        "sliding_window_counter" as const,
      ),
      limit: fc.integer({ min: 1, max: 8 }),
      windowMs: fc.integer({ min: 200, max: 3000 }),
    })
    .map((s): LimitSpec => ({ ...s, name: s.algorithm })),
  fc
    .record({ queue: fc.integer({ min: 0, max: 4 }), ms: fc.integer({ min: 50, max: 500 }) })
    .map((s): LimitSpec => ({ algorithm: "leaky_bucket", name: "lb", queue: s.queue, intervalMs: s.ms })),
);

let totalLocal = 0;
describe("deny cache", () => {
  it("never denies a request the store would admit", () => {
    fc.assert(
      fc.property(
        fc.array(specArb, { minLength: 2, maxLength: 2 }),
        fc.array(
          fc.record({
            dt: fc.integer({ min: 0, max: 400 }),
            cost: fc.integer({ min: 1, max: 4 }),
            which: fc.integer({ min: 0, max: 2 }),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        fc.array(fc.record({ at: fc.integer({ min: 0, max: 60 }), cost: fc.integer({ min: 1, max: 6 }) }), {
          maxLength: 5,
        }),
        (specs, steps, charges) => {
          const store = new MemoryStore({ sweepIntervalMs: 0 });
          const cache = new DenyCache();
          const keys = ["k0", "k1"];
          let now = 1_700_000_000_000;
          let localDenials = 0;
          steps.forEach((s, n) => {
            now += s.dt;
            for (const c of charges)
              if (c.at === n) store.chargeSync([{ key: keys[0]!, spec: specs[0]!, cost: c.cost }], now);
            const idx = s.which === 2 ? [0, 1] : [s.which];
            const checks: LimitCheck[] = idx.map((i) => ({ key: keys[i]!, spec: specs[i]!, cost: s.cost }));
            const local = cache.check(checks, now);
            if (local) {
              localDenials++;
              // What the store would say right now, without changing anything.
              for (const v of local.violated) {
                const c = checks[v.index]!;
                const would = ALGORITHMS[c.spec.algorithm].step(store.read(c.key, now), now, c.spec, c.cost);
                expect(
                  would.outcome.allowed,
                  `${c.spec.algorithm} cost ${c.cost} at +${now - 1_700_000_000_000}`,
                ).toBe(false);
              }
              return;
            }
            const decision = store.checkSync(checks, now);
            if (!decision.allowed) cache.remember(checks, decision.outcomes, now);
          });
          totalLocal += localDenials;
          return true;
        },
      ),
      { numRuns: 500 },
    );
    // The property must have been exercised: many requests were denied locally.
    expect(totalLocal).toBeGreaterThan(200);
  });

  it("does not cache concurrency or shadow limits, and smaller costs may still try", () => {
    const cache = new DenyCache();
    const denied = { allowed: false, remaining: 0, resetMs: 1000, retryAfterMs: 1000 };
    cache.remember(
      [
        {
          key: "c",
          spec: { algorithm: "concurrency", name: "c", maxInFlight: 1, leaseMs: 1000 },
          cost: 1,
          leaseId: "x",
        },
        {
          key: "s",
          spec: { algorithm: "token_bucket", name: "s", burst: 1, intervalMs: 1000, shadow: true },
          cost: 1,
        },
        { key: "t", spec: { algorithm: "token_bucket", name: "t", burst: 5, intervalMs: 1000 }, cost: 3 },
      ],
      [denied, denied, denied],
      0,
    );
    expect(cache.size).toBe(1);
    const t = {
      key: "t",
      spec: { algorithm: "token_bucket" as const, name: "t", burst: 5, intervalMs: 1000 },
    };
    expect(cache.check([{ ...t, cost: 2 }], 10)).toBeNull();
    expect(cache.check([{ ...t, cost: 3 }], 10)?.violated[0]?.outcome.retryAfterMs).toBe(990);
    expect(cache.check([{ ...t, cost: 3 }], 1000)).toBeNull();
  });
});
