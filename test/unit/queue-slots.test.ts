// Properties of the two traffic-shaping algorithms, on their pure arithmetic with a controlled
// clock: a leaky bucket serves admitted requests at least one interval apart and never queues
// more than `queue`; a concurrency limit never has more than `maxInFlight` live leases.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { concurrencyStep, type Leases, releaseLease } from "../../src/limits/algorithms/concurrency.js";
import { leakyBucketStep } from "../../src/limits/algorithms/leaky-bucket.js";
import { type ConcurrencySpec, type LeakyBucketSpec, localSpec } from "../../src/limits/spec.js";

describe("leaky bucket", () => {
  it("serves admitted requests one interval apart and never queues more than `queue`", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 8 }),
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 60 }),
        (queue, perSecond, gaps) => {
          const spec: LeakyBucketSpec = {
            algorithm: "leaky_bucket",
            name: "q",
            queue,
            intervalMs: 1000 / perSecond,
          };
          let tat: number | null = null;
          let now = 0;
          const served: number[] = [];
          for (const gap of gaps) {
            now += gap;
            const step = leakyBucketStep(tat, now, spec, 1);
            if (!step.outcome.allowed) {
              // Refused only when `queue` requests are already waiting for a later slot.
              const waiting = served.filter((t) => t > now + 1e-6).length;
              expect(waiting).toBeGreaterThanOrEqual(queue);
              continue;
            }
            tat = step.nextTat;
            const delay = step.outcome.delayMs ?? 0;
            expect(delay).toBeLessThanOrEqual(Math.ceil(queue * spec.intervalMs));
            served.push(now + delay);
          }
          for (let i = 1; i < served.length; i++) {
            // Delays are whole ms (rounded up), so two slots may sit up to 1 ms closer.
            expect(served[i]! - served[i - 1]!).toBeGreaterThanOrEqual(spec.intervalMs - 1);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("concurrency", () => {
  it("never has more than max_in_flight live leases, whatever is acquired, released or expires", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.record({ dt: fc.integer({ min: 0, max: 300 }), release: fc.boolean() }), {
          maxLength: 80,
        }),
        (max, ops) => {
          const spec: ConcurrencySpec = {
            algorithm: "concurrency",
            name: "c",
            maxInFlight: max,
            leaseMs: 1000,
          };
          let state: Leases = [];
          let now = 0;
          let seq = 0;
          for (const op of ops) {
            now += op.dt;
            if (op.release && state.length > 0) {
              state = releaseLease(state, state[0]![0]);
              continue;
            }
            const liveBefore = state.filter(([, expiresAt]) => expiresAt > now).length;
            const step = concurrencyStep(state, now, spec, `l${++seq}`);
            // Admitted exactly when a slot is free; then it holds one more lease.
            expect(step.outcome.allowed).toBe(liveBefore < max);
            if (step.outcome.allowed) state = step.next;
            const live = state.filter(([, expiresAt]) => expiresAt > now).length;
            expect(live).toBeLessThanOrEqual(max);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("on_failure: local shares of the new algorithms", () => {
  it("keeps a share of the queue and of the slots, never below one slot", () => {
    const leaky: LeakyBucketSpec = { algorithm: "leaky_bucket", name: "q", queue: 10, intervalMs: 100 };
    expect(localSpec(leaky, 0.5)).toMatchObject({ queue: 5, intervalMs: 200 });
    const slots: ConcurrencySpec = { algorithm: "concurrency", name: "c", maxInFlight: 3, leaseMs: 1000 };
    expect(localSpec(slots, 0.2)).toMatchObject({ maxInFlight: 1 });
  });
});
