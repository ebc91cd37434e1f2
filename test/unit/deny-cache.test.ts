// The deny cache never denies what the store would allow. For random request sequences over
// every cacheable algorithm (random costs, time moving on, several limits per request), each
// local denial is checked against the store's own arithmetic at that instant, read-only.
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ALGORITHMS } from "../../src/limits/algorithms/index.js";
import { BUDGET_DENIAL_MS, DenyCache, DenyCacheStore } from "../../src/limits/deny-cache.js";
import type { LimitCheck, LimitSpec, StoreDecision } from "../../src/limits/spec.js";
import type { CheckOptions, DenialRecord } from "../../src/limits/stores/contract.js";
import { DENIAL_FLUSH_MS } from "../../src/limits/stores/denial-queue.js";
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
    // One compiled spec object, as the limiter passes it to every check of the limit.
    const tSpec = { algorithm: "token_bucket" as const, name: "t", burst: 5, intervalMs: 1000 };
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
        { key: "t", spec: tSpec, cost: 3 },
      ],
      [denied, denied, denied],
      0,
    );
    expect(cache.size).toBe(1);
    const t = { key: "t", spec: tSpec };
    expect(cache.check([{ ...t, cost: 2 }], 10)).toBeNull();
    expect(cache.check([{ ...t, cost: 3 }], 10)?.violated[0]?.outcome.retryAfterMs).toBe(990);
    expect(cache.check([{ ...t, cost: 3 }], 1000)).toBeNull();
  });

  it("answers only for the spec it learnt a denial under: a runtime override asks the store", () => {
    const cache = new DenyCache();
    const five = { algorithm: "token_bucket" as const, name: "p.global", burst: 5, intervalMs: 60_000 };
    // The same limit, same key, as an override sizes it: another spec object.
    const twenty = { ...five, burst: 20 };
    const denied = { allowed: false, remaining: 0, resetMs: 300_000, retryAfterMs: 60_000 };
    cache.remember([{ key: "k", spec: five, cost: 1 }], [denied], 0);
    expect(cache.check([{ key: "k", spec: five, cost: 1 }], 10)?.violated).toHaveLength(1);
    expect(cache.check([{ key: "k", spec: twenty, cost: 1 }], 10)).toBeNull();
    // And the entry is gone: the override ending does not bring back a denial learnt before it.
    expect(cache.size).toBe(0);
  });

  it("remembers a token budget's max_cost denial by what it had to fit, not by its cost", () => {
    const cache = new DenyCache();
    const budget = {
      key: "b",
      spec: {
        algorithm: "fixed_window" as const,
        name: "b",
        limit: 100,
        windowMs: 60_000,
        unit: "tokens" as const,
      },
    };
    const denied = { allowed: false, remaining: 40, resetMs: 60_000, retryAfterMs: 60_000 };
    cache.remember([{ ...budget, cost: 1, need: 50 }], [denied], 0);
    // A request without max_cost (need 1) may still fit the 40 left: the store decides.
    expect(cache.check([{ ...budget, cost: 1 }], 10)).toBeNull();
    expect(cache.check([{ ...budget, cost: 1, need: 30 }], 10)).toBeNull();
    expect(cache.check([{ ...budget, cost: 1, need: 50 }], 10)?.violated).toHaveLength(1);
  });

  it("answers a budget's denial with the store's wait, though it keeps the entry only a second", () => {
    const cache = new DenyCache();
    const month = {
      algorithm: "fixed_window" as const,
      name: "t.month",
      limit: 100,
      windowMs: 2_592_000_000,
    };
    const budget = { key: "m", spec: { ...month, unit: "tokens" as const }, cost: 1 };
    const wait = 1_000_000_000;
    cache.remember([budget], [{ allowed: false, remaining: 0, resetMs: wait, retryAfterMs: wait }], 0);
    // What the client is told: the store's wait, not the cache's second (x-should-retry follows it).
    expect(cache.check([budget], 400)?.violated[0]?.outcome.retryAfterMs).toBe(wait - 400);
    // After the second the store decides again (a give-back may have loosened it).
    expect(cache.check([budget], BUDGET_DENIAL_MS)).toBeNull();
  });
});

describe("DenyCacheStore (the cache as a store decorator)", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const T0 = 1_699_999_980_000; // a whole minute: the fixed window starts here
  const oneAMinute: LimitSpec = { algorithm: "fixed_window", name: "p.minute", limit: 1, windowMs: 60_000 };
  const slots: LimitSpec = { algorithm: "concurrency", name: "p.slots", maxInFlight: 5, leaseMs: 1000 };
  const record: DenialRecord = {
    logKey: "t:{c:a}:denials",
    topKey: "t:{denials}:top:0",
    caller: "client:a",
    route: "r",
  };

  function setup() {
    let now = T0;
    const store = new MemoryStore({ sweepIntervalMs: 0, now: () => now });
    const calls: (CheckOptions | undefined)[] = [];
    const counting = Object.assign(Object.create(store) as MemoryStore, {
      check: (checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> => {
        calls.push(options);
        return store.check(checks, options);
      },
    });
    const cached = new DenyCacheStore(counting, { now: () => now });
    const checks = (): LimitCheck[] => [
      { key: "t:{c:a}:p.slots", spec: slots, cost: 1, leaseId: `l${calls.length}` },
      { key: "t:{c:a}:p.minute", spec: oneAMinute, cost: 1 },
    ];
    return { store, cached, checks, calls, advance: (ms: number) => (now += ms) };
  }

  it("answers a known denial locally, marked local, and writes it at the next flush", async () => {
    const { store, cached, checks, calls, advance } = setup();
    expect((await cached.check(checks(), { denial: record })).allowed).toBe(true);
    const byStore = await cached.check(checks(), { denial: record });
    expect(byStore).toMatchObject({ allowed: false });
    expect(byStore.local).toBeUndefined();
    expect(calls).toHaveLength(2);
    expect(await store.denials(record.logKey)).toHaveLength(1); // the store's own record

    advance(1000);
    const local = await cached.check(checks(), { denial: record });
    expect(calls).toHaveLength(2); // the store was not asked
    expect(local.local).toBe(true);
    expect(local.allowed).toBe(false);
    // Only the cached limit is denied; the concurrency limit is not known here.
    expect(local.outcomes.map((o) => o.allowed)).toEqual([true, false]);
    expect(local.outcomes[1]).toMatchObject({ retryAfterMs: 59_000, remaining: 0 });

    expect(await store.denials(record.logKey)).toHaveLength(1);
    await cached.flushDenials();
    const log = await store.denials(record.logKey);
    expect(log).toHaveLength(2);
    expect(log[0]).toEqual({ atMs: T0 + 1000, route: "r", limits: ["p.minute"] });
    expect(await store.topDenials([record.topKey], 5)).toEqual([{ caller: "client:a", count: 2 }]);
    await cached.close();
  });

  it("flushes every DENIAL_FLUSH_MS on its own", async () => {
    vi.useFakeTimers();
    const { store, cached, checks, advance } = setup();
    await cached.check(checks(), { denial: record });
    await cached.check(checks(), { denial: record });
    await cached.check(checks(), { denial: record });
    advance(1);
    await cached.check(checks(), { denial: record });
    expect(await store.denials(record.logKey)).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(DENIAL_FLUSH_MS);
    expect(await store.denials(record.logKey)).toHaveLength(3);
    await cached.close();
  });

  it("asks the store again once the retry-after passed, or after an operator's reset", async () => {
    const { cached, checks, calls, advance } = setup();
    await cached.check(checks(), { denial: record });
    await cached.check(checks(), { denial: record });
    await cached.check(checks(), { denial: record });
    expect(calls).toHaveLength(2);
    cached.forget(["t:{c:a}:p.minute"]);
    await cached.check(checks(), { denial: record });
    expect(calls).toHaveLength(3);
    advance(60_000);
    expect((await cached.check(checks(), { denial: record })).allowed).toBe(true);
    expect(calls).toHaveLength(4);
    await cached.close();
  });
});

describe("deny cache and budgets that are given back", () => {
  const budget: LimitSpec = {
    algorithm: "fixed_window",
    name: "t.month",
    limit: 100,
    windowMs: 30 * 86_400_000,
    unit: "tokens",
  };
  const denied = (retryAfterMs: number) => [
    { allowed: false, remaining: 10, resetMs: retryAfterMs, retryAfterMs },
  ];

  it("keeps a budget's denial at most a second, though its window resets in a month", () => {
    const cache = new DenyCache();
    const check: LimitCheck = { key: "b", spec: budget, cost: 50 };
    cache.remember([check], denied(2_000_000_000), 0);
    expect(cache.check([check], 999)).not.toBeNull();
    // A give-back may have made room: the store is asked again.
    expect(cache.check([check], 1000)).toBeNull();
    const rate: LimitSpec = { ...budget, name: "t.requests", unit: undefined };
    cache.remember([{ key: "r", spec: rate, cost: 1 }], denied(60_000), 0);
    expect(cache.check([{ key: "r", spec: rate, cost: 1 }], 59_999)).not.toBeNull();
  });

  it("forgets a key when a give-back passes through it", async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0, now: () => 1_000 });
    const cached = new DenyCacheStore(store, { now: () => 1_000 });
    const check: LimitCheck = { key: "b", spec: budget, cost: 80 };
    const first = await cached.check([check]);
    expect(first.allowed).toBe(true);
    expect((await cached.check([check])).allowed).toBe(false);
    // Denied now from the cache, without the store.
    expect((await cached.check([check])).local).toBe(true);
    await cached.refund([{ check, units: 70, at: first.decidedAt as number }]);
    const after = await cached.check([check]);
    expect(after).toMatchObject({ allowed: true });
    await cached.close();
  });
});
