// AI reservations on every store (issue 29): a request takes its whole reservation in the check
// that admits it, and is settled afterwards to what it used, by a give-back (refund.lua /
// MemoryStore.refund) into the window the reservation was taken from or a debit (charge.lua) of
// what it used beyond it. The same expectations on the memory store, on Redis and on a Redis
// Cluster make the Lua and the TypeScript agree. The property: over any interleaving of
// reservations (some concurrent, from several instances), settlements to honest usage, to usage
// beyond the reservation, cut-short answers (the reservation stands) and errors (all but the
// cost back), a reservation is admitted exactly when what is held plus it fits the budget, what
// is held never exceeds the budget by more than the overruns reported, and the store ends
// holding exactly what was charged.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LimitCheck, LimitSpec, WindowSpec } from "../../src/limits/spec.js";
import type { Store } from "../../src/limits/stores/contract.js";
import { freshKey, type StoreHarness } from "./suite.js";

const T0 = 1_700_000_000_000;

/** Budgets whose units are given back and debited: a window, a calendar month, a slow bucket. */
const budgets = (limit: number): LimitSpec[] => [
  { algorithm: "fixed_window", name: "s.fw", limit, windowMs: 86_400_000, unit: "tokens" },
  {
    algorithm: "fixed_window",
    name: "s.month",
    limit,
    windowMs: 30 * 86_400_000,
    calendar: { unit: "month", tz: "UTC" },
    unit: "usd",
  },
  // No refill worth counting within a test: a token back every 10^9 ms.
  { algorithm: "token_bucket", name: "s.tb", burst: limit, intervalMs: 1e9, unit: "tokens" },
  { algorithm: "sliding_window_counter", name: "s.swc", limit, windowMs: 86_400_000, unit: "tokens" },
];

/** What a budget holds now, read without consuming. */
async function held(store: Store, key: string, spec: LimitSpec, nowMs: number): Promise<number> {
  const [view] = await store.peek([{ key, spec, cost: 0 }], { nowMs });
  const capacity = spec.algorithm === "token_bucket" ? spec.burst : (spec as WindowSpec).limit;
  return capacity - view!.remaining;
}

export function settlementConformance(name: string, harness: () => StoreHarness) {
  describe(`${name}: AI reservations, settled`, () => {
    for (const spec of budgets(10_000)) {
      it(`${spec.algorithm}${spec.name === "s.month" ? " (calendar)" : ""}: reserve 3,000, use 1,200: 1,200 held; use 4,000: 1,000 more, into debt past the budget`, async () => {
        const h = harness();
        const key = freshKey(`settle-${spec.name}`);
        const store = await h.store();
        const check: LimitCheck = { key, spec, cost: 3000 };
        const d = await store.check([check], { nowMs: T0 });
        expect(d.allowed).toBe(true);
        expect(d.decidedAt).toBeDefined();
        expect(await held(store, key, spec, T0)).toBe(3000);
        await (await h.store()).refund([{ check, units: 1800, at: d.decidedAt as number }], { nowMs: T0 });
        expect(await held(store, key, spec, T0)).toBe(1200);
        // Three more of 3,000 fit (1,200 + 9,000 = 10,200 > 10,000: the third does not).
        const more = [];
        for (let i = 0; i < 3; i++) more.push((await store.check([check], { nowMs: T0 })).allowed);
        expect(more).toEqual([true, true, false]);
        // One of them reported 4,000: 1,000 beyond its reservation, debited whatever is left.
        await store.charge([{ key, spec, cost: 1000 }], { nowMs: T0 });
        expect(await held(store, key, spec, T0)).toBe(8200);
        expect((await store.check([{ key, spec, cost: 1800 }], { nowMs: T0 })).allowed).toBe(true);
        expect((await store.check([{ key, spec, cost: 1 }], { nowMs: T0 })).allowed).toBe(false);
      });
    }

    it("a give-back after the window it was taken from has passed gives nothing back", async () => {
      const h = harness();
      const store = await h.store();
      const day = 86_400_000;
      const start = Math.ceil(T0 / day) * day;
      const spec: WindowSpec = {
        algorithm: "fixed_window",
        name: "s.late",
        limit: 100,
        windowMs: day,
        unit: "tokens",
      };
      const key = freshKey("settle-late");
      const check = { key, spec, cost: 80 };
      const taken = await store.check([check], { nowMs: start - 1 });
      expect(taken.allowed).toBe(true);
      // The next day's window holds its own reservation: the old one's units do not go there.
      expect((await store.check([check], { nowMs: start + 10 })).allowed).toBe(true);
      await store.refund([{ check, units: 80, at: taken.decidedAt as number }], { nowMs: start + 10 });
      expect(await held(store, key, spec, start + 10)).toBe(80);
    });

    it("100 concurrent reservations of 300 from several instances against 10,000: exactly 33 admitted", async () => {
      const h = harness();
      const stores = await Promise.all([h.store(), h.store(), h.store()]);
      const spec = budgets(10_000)[0]!;
      const key = freshKey("settle-concurrent");
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          stores[i % 3]!.check([{ key, spec, cost: 300 }], { nowMs: T0 }),
        ),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(33);
    });

    it("over any interleaving of reserve, settle, overrun, cut short and error: exact, and never past the budget but for overruns (property)", async () => {
      type Op =
        | { kind: "reserve"; size: number; together: number }
        | { kind: "settle"; pick: number; share: number }
        | { kind: "overrun"; pick: number; extra: number }
        | { kind: "cut"; pick: number }
        | { kind: "error"; pick: number };
      const op: fc.Arbitrary<Op> = fc.oneof(
        fc.record({
          kind: fc.constant("reserve" as const),
          size: fc.integer({ min: 1, max: 400 }),
          together: fc.integer({ min: 1, max: 4 }),
        }),
        fc.record({
          kind: fc.constant("settle" as const),
          pick: fc.nat(),
          share: fc.double({ min: 0, max: 1, noNaN: true }),
        }),
        fc.record({
          kind: fc.constant("overrun" as const),
          pick: fc.nat(),
          extra: fc.integer({ min: 1, max: 50 }),
        }),
        fc.record({ kind: fc.constant("cut" as const), pick: fc.nat() }),
        fc.record({ kind: fc.constant("error" as const), pick: fc.nat() }),
      );
      const h = harness();
      const stores = [await h.store(), await h.store()];
      const COST = 1;
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 3 }),
          fc.integer({ min: 100, max: 1500 }),
          fc.array(op, { maxLength: 14 }),
          async (which, limit, ops) => {
            const spec = budgets(limit)[which]!;
            const key = freshKey(`settle-prop-${run++}`);
            const inFlight: { check: LimitCheck; at: string | number }[] = [];
            let charged = 0; // settled: what each request was finally charged
            let overrun = 0;
            const holding = () => charged + inFlight.reduce((s, r) => s + r.check.cost, 0);
            for (const o of ops) {
              if (o.kind === "reserve") {
                const checks = Array.from({ length: o.together }, () => ({ key, spec, cost: o.size }));
                const before = holding();
                const results = await Promise.all(
                  checks.map((c, i) => stores[i % 2]!.check([c], { nowMs: T0 })),
                );
                const admitted = results.filter((r) => r.allowed).length;
                // Exactly as many as fit, whichever instance decided: the check is atomic.
                expect(admitted).toBe(
                  Math.max(0, Math.min(o.together, Math.floor((limit - before) / o.size))),
                );
                results.forEach((r, i) => {
                  if (r.allowed) inFlight.push({ check: checks[i]!, at: r.decidedAt as string | number });
                });
              } else if (inFlight.length > 0) {
                const [r] = inFlight.splice(o.pick % inFlight.length, 1);
                const { check, at } = r!;
                const store = stores[o.pick % 2]!;
                if (o.kind === "settle") {
                  const used = Math.floor(check.cost * o.share);
                  if (used < check.cost)
                    await store.refund([{ check, units: check.cost - used, at }], { nowMs: T0 });
                  charged += used;
                } else if (o.kind === "overrun") {
                  await store.charge([{ key, spec, cost: o.extra }], { nowMs: T0 });
                  charged += check.cost + o.extra;
                  overrun += o.extra;
                } else if (o.kind === "cut") {
                  charged += check.cost;
                } else {
                  if (check.cost > COST)
                    await store.refund([{ check, units: check.cost - COST, at }], { nowMs: T0 });
                  charged += Math.min(COST, check.cost);
                }
              }
              // Never held past the budget but for what upstreams reported beyond reservations.
              expect(holding()).toBeLessThanOrEqual(limit + overrun);
              const seen = await held(stores[0]!, key, spec, T0);
              expect(seen).toBe(Math.min(limit, holding()));
            }
          },
        ),
        { numRuns: 40 },
      );
    });
  });
}
