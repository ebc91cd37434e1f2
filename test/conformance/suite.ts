// One behavioural suite for every Store. Deterministic cases pass `now` explicitly, so both
// stores see the same clock; the expiry case uses each store's own clock through the harness.
import { describe, expect, it } from "vitest";
import type {
  ConcurrencySpec,
  LeakyBucketSpec,
  LimitCheck,
  LimitSpec,
  TokenBucketSpec,
  WindowSpec,
} from "../../src/limits/spec.js";
import type { Store } from "../../src/limits/stores/contract.js";

export interface StoreHarness {
  /** A fresh store sharing state with every other store of this harness (another "instance"). */
  store(): Promise<Store>;
  /** Remaining TTL of a key in ms, or null when the key does not exist. */
  pttl(key: string): Promise<number | null>;
  /** Lets `ms` of the store's own clock pass. */
  advance(ms: number): Promise<void>;
}

// The seed lab: capacity 10, refill 5/s.
export const LAB: TokenBucketSpec = {
  algorithm: "token_bucket",
  name: "lab.global",
  burst: 10,
  intervalMs: 200,
};

let keySeq = 0;
export const freshKey = (label: string) => `test:{c:${label}-${process.pid}-${++keySeq}}:lab.global`;

const T0 = 1_700_000_000_000;

async function sequential(store: Store, checks: LimitCheck[], n: number, nowMs?: number) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await store.check(checks, { nowMs }));
  return out;
}

export function storeConformance(name: string, harness: () => StoreHarness) {
  describe(`${name}: token bucket conformance`, () => {
    it("capacity: a full bucket admits exactly its burst", async () => {
      const h = harness();
      const key = freshKey("capacity");
      const results = await sequential(await h.store(), [{ key, spec: LAB, cost: 1 }], 12, T0);
      expect(results.map((r) => r.allowed)).toEqual([...Array(10).fill(true), false, false]);
      expect(results[0]!.outcomes[0]).toEqual({ allowed: true, remaining: 9, resetMs: 200, retryAfterMs: 0 });
      expect(results[9]!.outcomes[0]!.remaining).toBe(0);
      expect(results[10]!.outcomes[0]).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: 2000,
        retryAfterMs: 200,
      });
    });

    it("refill: 1 s after emptying, 5 of 8 pass (rate 5/s)", async () => {
      const h = harness();
      const key = freshKey("refill");
      const checks = [{ key, spec: LAB, cost: 1 }];
      await sequential(await h.store(), checks, 12, T0);
      const later = await sequential(await h.store(), checks, 8, T0 + 1000);
      expect(later.map((r) => r.allowed)).toEqual([true, true, true, true, true, false, false, false]);
      // Half a token later still nothing; a full token later, one more.
      expect((await (await h.store()).check(checks, { nowMs: T0 + 1100 })).allowed).toBe(false);
      expect((await (await h.store()).check(checks, { nowMs: T0 + 1200 })).allowed).toBe(true);
    });

    it("atomicity: 200 concurrent checks from several instances admit exactly the burst", async () => {
      const h = harness();
      const key = freshKey("atomic");
      const stores = await Promise.all([h.store(), h.store(), h.store(), h.store()]);
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          stores[i % stores.length]!.check([{ key, spec: LAB, cost: 1 }]),
        ),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(10);
    });

    it("atomicity: several limits are all or nothing", async () => {
      const h = harness();
      // Under one hash tag, as one caller's limits are (a Redis Cluster needs that for atomicity).
      const big = freshKey("big");
      const small = `${big}:small`;
      const smallSpec: TokenBucketSpec = { ...LAB, name: "lab.small", burst: 2 };
      const both: LimitCheck[] = [
        { key: big, spec: LAB, cost: 1 },
        { key: small, spec: smallSpec, cost: 1 },
      ];
      const results = await sequential(await h.store(), both, 3, T0);
      expect(results.map((r) => r.allowed)).toEqual([true, true, false]);
      expect(results[2]!.outcomes.map((o) => o.allowed)).toEqual([true, false]);
      // The limit that would have allowed reports what is available now: nothing was taken.
      expect(results[2]!.outcomes[0]).toEqual({ allowed: true, remaining: 8, resetMs: 400, retryAfterMs: 0 });
      // The denied request took nothing from the big bucket: 8 left exactly.
      expect((await (await h.store()).check([{ key: big, spec: LAB, cost: 8 }], { nowMs: T0 })).allowed).toBe(
        true,
      );
      expect((await (await h.store()).check([{ key: big, spec: LAB, cost: 1 }], { nowMs: T0 })).allowed).toBe(
        false,
      );
    });

    it("isolation: one key's use leaves another untouched", async () => {
      const h = harness();
      const a = freshKey("iso-a");
      const b = freshKey("iso-b");
      await sequential(await h.store(), [{ key: a, spec: LAB, cost: 1 }], 12, T0);
      const other = await (await h.store()).check([{ key: b, spec: LAB, cost: 1 }], { nowMs: T0 });
      expect(other.outcomes[0]).toMatchObject({ allowed: true, remaining: 9 });
    });

    it("cost: cost 5 with 4 left is denied and takes nothing", async () => {
      const h = harness();
      const key = freshKey("cost");
      await sequential(await h.store(), [{ key, spec: LAB, cost: 1 }], 6, T0);
      const denied = await (await h.store()).check([{ key, spec: LAB, cost: 5 }], { nowMs: T0 });
      expect(denied.allowed).toBe(false);
      expect(denied.outcomes[0]).toMatchObject({ remaining: 4, retryAfterMs: 200 });
      const four = await (await h.store()).check([{ key, spec: LAB, cost: 4 }], { nowMs: T0 });
      expect(four.outcomes[0]).toMatchObject({ allowed: true, remaining: 0 });
    });

    it("expiry: the key outlives time-to-full by at most 1 s, then is gone and the bucket is full", async () => {
      const h = harness();
      const key = freshKey("expiry");
      // 2 tokens, one back every 100 ms: a full refill takes 200 ms, so the TTL is at most 1.2 s
      // (Redis sets it on a grid of half seconds, lua/token_bucket.lua: past 0.7 s).
      const fast: TokenBucketSpec = {
        algorithm: "token_bucket",
        name: "lab.fast",
        burst: 2,
        intervalMs: 100,
      };
      const store = await h.store();
      const setAt = performance.now();
      await sequential(store, [{ key, spec: fast, cost: 1 }], 2);
      const ttl = await h.pttl(key);
      // A real Redis's TTL runs down between the write and the PTTL: 697 was read once under
      // CI load, 3 ms after a TTL set past 700.
      const elapsed = Math.ceil(performance.now() - setAt);
      expect(ttl).not.toBeNull();
      expect(ttl!).toBeGreaterThan(700 - elapsed);
      expect(ttl!).toBeLessThanOrEqual(1200);
      await h.advance(1300);
      expect(await h.pttl(key)).toBeNull();
      const next = await (await h.store()).check([{ key, spec: fast, cost: 1 }]);
      expect(next.outcomes[0]).toMatchObject({ allowed: true, remaining: 1 });
    });
  });

  describe(`${name}: window algorithms`, () => {
    const fixed: WindowSpec = { algorithm: "fixed_window", name: "w.fixed", limit: 11, windowMs: 3_600_000 };
    const sliding: WindowSpec = { algorithm: "sliding_window", name: "w.sliding", limit: 7, windowMs: 2000 };

    it("fixed window: exactly the limit per aligned window, then a fresh window", async () => {
      const h = harness();
      const key = freshKey("fixed");
      const start = Math.floor(T0 / fixed.windowMs) * fixed.windowMs;
      const first = await sequential(await h.store(), [{ key, spec: fixed, cost: 1 }], 13, start + 1000);
      expect(first.filter((r) => r.allowed)).toHaveLength(11);
      expect(first[10]!.outcomes[0]).toMatchObject({ allowed: true, remaining: 0 });
      expect(first[11]!.outcomes[0]).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: fixed.windowMs - 1000,
        retryAfterMs: fixed.windowMs - 1000,
      });
      const next = await sequential(
        await h.store(),
        [{ key, spec: fixed, cost: 1 }],
        12,
        start + fixed.windowMs,
      );
      expect(next.filter((r) => r.allowed)).toHaveLength(11);
    });

    it("sliding window log: never more than the limit in any window, retry when the oldest leaves", async () => {
      const h = harness();
      const key = freshKey("sliding");
      const store = await h.store();
      const at = async (t: number, cost = 1) =>
        store.check([{ key, spec: sliding, cost }], { nowMs: T0 + t });
      for (let i = 0; i < 4; i++) expect((await at(0)).allowed).toBe(true);
      for (let i = 0; i < 3; i++) expect((await at(500)).allowed).toBe(true);
      const denied = await at(1000);
      expect(denied.outcomes[0]).toEqual({ allowed: false, remaining: 0, resetMs: 1500, retryAfterMs: 1000 });
      // At 2000 the four from t=0 have left the window: four more fit, not five.
      const later = [];
      for (let i = 0; i < 5; i++) later.push((await at(2000)).allowed);
      expect(later).toEqual([true, true, true, true, false]);
      // A cost of 3 needs three of the oldest to leave: the ones from t=500 leave at 2500.
      expect((await at(2100, 3)).outcomes[0]).toMatchObject({ allowed: false, retryAfterMs: 400 });
      expect((await at(2500, 3)).allowed).toBe(true);
    });

    it("sliding window: 200 concurrent checks from several instances admit exactly 7, and 7 again a window later", async () => {
      const h = harness();
      const key = freshKey("sliding-burst");
      const stores = await Promise.all([h.store(), h.store(), h.store()]);
      const burst = (t?: number) =>
        Promise.all(
          Array.from({ length: 200 }, (_, i) =>
            stores[i % 3]!.check([{ key, spec: sliding, cost: 1 }], { nowMs: t }),
          ),
        );
      expect((await burst(T0)).filter((r) => r.allowed)).toHaveLength(7);
      expect((await burst(T0 + 2000)).filter((r) => r.allowed)).toHaveLength(7);
    });

    it("sliding window counter: the previous window counts by its remaining overlap", async () => {
      const h = harness();
      const key = freshKey("counter");
      const counter: WindowSpec = {
        algorithm: "sliding_window_counter",
        name: "w.counter",
        limit: 9,
        windowMs: 1000,
      };
      const start = Math.ceil(T0 / 1000) * 1000;
      const store = await h.store();
      const at = (t: number) => store.check([{ key, spec: counter, cost: 1 }], { nowMs: start + t });
      const first = [];
      for (let i = 0; i < 10; i++) first.push((await at(500)).allowed);
      expect(first.filter(Boolean)).toHaveLength(9);
      // Half-way through the next window the previous 9 weigh 4.5: 4 more fit, not 5.
      const second = [];
      for (let i = 0; i < 6; i++) second.push((await at(1500)).allowed);
      expect(second).toEqual([true, true, true, true, false, false]);
    });

    it("post-charge: a first request charged 15 in all against burst 20 leaves exactly 5; debt is waited out", async () => {
      const h = harness();
      const key = freshKey("charge");
      const store = await h.store();
      const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "c.tb", burst: 20, intervalMs: 100 };
      expect((await store.check([{ key, spec, cost: 1 }], { nowMs: T0 })).outcomes[0]!.remaining).toBe(19);
      await store.charge([{ key, spec, cost: 14 }], { nowMs: T0 });
      expect((await store.check([{ key, spec, cost: 5 }], { nowMs: T0 })).outcomes[0]).toMatchObject({
        allowed: true,
        remaining: 0,
      });
      // Into debt: 10 more than is left. The next unit fits only once 10 + 1 tokens came back.
      await store.charge([{ key, spec, cost: 10 }], { nowMs: T0 });
      expect((await store.check([{ key, spec, cost: 1 }], { nowMs: T0 })).outcomes[0]).toMatchObject({
        allowed: false,
        retryAfterMs: 1100,
      });
      expect((await store.check([{ key, spec, cost: 1 }], { nowMs: T0 + 1100 })).allowed).toBe(true);
    });

    it("post-charge on windows adds units past the limit", async () => {
      const h = harness();
      const store = await h.store();
      for (const algorithm of ["fixed_window", "sliding_window", "sliding_window_counter"] as const) {
        const key = freshKey(`charge-${algorithm}`);
        const spec: WindowSpec = { algorithm, name: `c.${algorithm}`, limit: 10, windowMs: 60_000 };
        const start = Math.ceil(T0 / 60_000) * 60_000;
        await store.check([{ key, spec, cost: 1 }], { nowMs: start });
        await store.charge([{ key, spec, cost: 12 }], { nowMs: start });
        expect((await store.check([{ key, spec, cost: 1 }], { nowMs: start })).allowed, algorithm).toBe(
          false,
        );
      }
    });

    it("post-charge of 1,000,000 on a sliding window of 100/h: blocked for exactly one window, then the full limit", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("charge-huge");
      const spec: WindowSpec = {
        algorithm: "sliding_window",
        name: "c.huge",
        limit: 100,
        windowMs: 3_600_000,
      };
      expect((await store.check([{ key, spec, cost: 1 }], { nowMs: T0 })).allowed).toBe(true);
      expect(await store.charge([{ key, spec, cost: 1_000_000 }], { nowMs: T0 + 5 })).toEqual([
        { remaining: 0, resetMs: spec.windowMs },
      ]);
      expect((await store.check([{ key, spec, cost: 1 }], { nowMs: T0 + 6 })).outcomes[0]).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: spec.windowMs - 1,
        retryAfterMs: spec.windowMs - 1,
      });
      expect(
        (await store.check([{ key, spec, cost: 1 }], { nowMs: T0 + 5 + spec.windowMs - 1 })).allowed,
      ).toBe(false);
      expect((await store.check([{ key, spec, cost: 100 }], { nowMs: T0 + 5 + spec.windowMs })).allowed).toBe(
        true,
      );
    });

    it("window keys expire once irrelevant", async () => {
      const h = harness();
      const key = freshKey("window-ttl");
      const short: WindowSpec = { algorithm: "sliding_window", name: "w.short", limit: 2, windowMs: 200 };
      await sequential(await h.store(), [{ key, spec: short, cost: 1 }], 2);
      const ttl = await h.pttl(key);
      expect(ttl).not.toBeNull();
      expect(ttl!).toBeLessThanOrEqual(1200);
      await h.advance(1300);
      expect(await h.pttl(key)).toBeNull();
    });
  });

  describe(`${name}: calendar windows`, () => {
    // Each store decides at the suite's now (Redis's scripts too: the test passes it), so both
    // must reset at exactly local 00:00 of the zone, daylight-saving days included.
    const calendar = (unit: "day" | "week" | "month", tz: string, limit: number): WindowSpec => ({
      algorithm: "fixed_window",
      name: `cal.${unit}`,
      limit,
      windowMs: { day: 86_400_000, week: 604_800_000, month: 2_592_000_000 }[unit],
      calendar: { unit, tz },
    });
    const at = Date.parse;
    const check = (store: Store, key: string, spec: WindowSpec, nowMs: number, cost = 1) =>
      store.check([{ key, spec, cost }], { nowMs }).then((d) => d.outcomes[0]!);

    it("a month in Europe/Berlin: exhausted at 30 Nov 23:59:59.999, whole again at 1 Dec 00:00:00.000", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("cal-month");
      const spec = calendar("month", "Europe/Berlin", 3);
      const dec1 = at("2026-11-30T23:00:00.000Z"); // 1 Dec 00:00 CET
      const jan1 = at("2026-12-31T23:00:00.000Z");
      const nov10 = at("2026-11-10T12:00:00.000Z");
      for (let i = 0; i < 3; i++) expect((await check(store, key, spec, nov10)).allowed).toBe(true);
      expect(await check(store, key, spec, nov10)).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: dec1 - nov10,
        retryAfterMs: dec1 - nov10,
      });
      expect(await check(store, key, spec, dec1 - 1)).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: 1,
        retryAfterMs: 1,
      });
      expect(await check(store, key, spec, dec1)).toEqual({
        allowed: true,
        remaining: 2,
        resetMs: jan1 - dec1,
        retryAfterMs: 0,
      });
      // A second instance sees the same December.
      expect(await check(await h.store(), key, spec, dec1 + 5, 2)).toMatchObject({
        allowed: true,
        remaining: 0,
      });
      expect((await check(store, key, spec, jan1 - 1)).allowed).toBe(false);
    });

    it("a day in America/New_York on 2026-11-01 lasts 25 hours: the budget lasts until local midnight", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("cal-day-fall");
      const spec = calendar("day", "America/New_York", 2);
      const start = at("2026-11-01T04:00:00.000Z"); // 00:00 EDT
      const end = at("2026-11-02T05:00:00.000Z"); // 00:00 EST, 25 h later
      expect(await check(store, key, spec, start, 2)).toEqual({
        allowed: true,
        remaining: 0,
        resetMs: 25 * 3_600_000,
        retryAfterMs: 0,
      });
      // 24 hours on, a rolling day would have reset: the calendar day has an hour to go.
      expect(await check(store, key, spec, start + 24 * 3_600_000)).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: 3_600_000,
        retryAfterMs: 3_600_000,
      });
      expect((await check(store, key, spec, end - 1)).allowed).toBe(false);
      expect(await check(store, key, spec, end)).toEqual({
        allowed: true,
        remaining: 1,
        resetMs: 24 * 3_600_000,
        retryAfterMs: 0,
      });
    });

    it("a day in America/New_York on 2026-03-08 lasts 23 hours", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("cal-day-spring");
      const spec = calendar("day", "America/New_York", 1);
      const start = at("2026-03-08T05:00:00.000Z"); // 00:00 EST
      const end = at("2026-03-09T04:00:00.000Z"); // 00:00 EDT, 23 h later
      expect(await check(store, key, spec, start + 1000)).toMatchObject({
        allowed: true,
        resetMs: end - start - 1000,
      });
      expect(await check(store, key, spec, end - 1)).toMatchObject({ allowed: false, retryAfterMs: 1 });
      expect((await check(store, key, spec, end)).allowed).toBe(true);
    });

    it("a week resets on Monday 00:00", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("cal-week");
      const spec = calendar("week", "Europe/Berlin", 1);
      // Wednesday 2026-12-02; the week ends on Monday 2026-12-07 00:00 CET.
      const monday = at("2026-12-06T23:00:00.000Z");
      expect((await check(store, key, spec, at("2026-12-02T09:00:00.000Z"))).allowed).toBe(true);
      expect(await check(store, key, spec, monday - 1)).toMatchObject({ allowed: false, retryAfterMs: 1 });
      expect(await check(store, key, spec, monday)).toEqual({
        allowed: true,
        remaining: 0,
        resetMs: 7 * 86_400_000,
        retryAfterMs: 0,
      });
    });

    it("a post-charge past the limit is debt until the period ends, and nothing after it", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("cal-charge");
      const spec = calendar("month", "UTC", 100);
      const now = at("2026-11-30T10:00:00.000Z");
      const dec1 = at("2026-12-01T00:00:00.000Z");
      expect((await check(store, key, spec, now)).allowed).toBe(true);
      expect(await store.charge([{ key, spec, cost: 1_000_000 }], { nowMs: now })).toEqual([
        { remaining: 0, resetMs: dec1 - now },
      ]);
      expect(await store.peek([{ key, spec, cost: 0 }], { nowMs: dec1 - 1 })).toEqual([
        { remaining: 0, resetMs: 1 },
      ]);
      expect(await check(store, key, spec, dec1 - 1)).toMatchObject({ allowed: false, retryAfterMs: 1 });
      // December starts with the whole limit: the debt stayed in November.
      expect(await store.peek([{ key, spec, cost: 0 }], { nowMs: dec1 })).toEqual([
        { remaining: 100, resetMs: 31 * 86_400_000 },
      ]);
      expect(await check(store, key, spec, dec1, 100)).toMatchObject({ allowed: true, remaining: 0 });
    });

    it("the key lives until the period ends, plus the slack, on the store's own clock", async () => {
      const h = harness();
      const key = freshKey("cal-ttl");
      const spec = calendar("day", "UTC", 5);
      const decided = await (await h.store()).check([{ key, spec, cost: 1 }]);
      const resetMs = decided.outcomes[0]!.resetMs;
      expect(resetMs).toBeGreaterThan(0);
      expect(resetMs).toBeLessThanOrEqual(86_400_000);
      const ttl = await h.pttl(key);
      expect(ttl).not.toBeNull();
      expect(ttl!).toBeLessThanOrEqual(resetMs + 1000);
      expect(ttl!).toBeGreaterThan(resetMs + 1000 - 500);
    });
  });

  describe(`${name}: a limit whose algorithm changed under the same key`, () => {
    // A reload changed the limit's algorithm, or a client override replaced the plan's limit
    // under its name: the key holds another algorithm's state (in Redis, maybe another type).
    it("starts afresh with the new algorithm, each way, and is never refused for it", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("changed");
      const bucket: TokenBucketSpec = {
        algorithm: "token_bucket",
        name: "c.x",
        burst: 2,
        intervalMs: 60_000,
      };
      const log: WindowSpec = { algorithm: "sliding_window", name: "c.x", limit: 3, windowMs: 60_000 };
      const slots: LimitSpec = { algorithm: "concurrency", name: "c.x", maxInFlight: 2, leaseMs: 60_000 };
      const once = (spec: LimitSpec, leaseId?: string) =>
        store.check([leaseId ? { key, spec, cost: 1, leaseId } : { key, spec, cost: 1 }]);
      expect((await sequential(store, [{ key, spec: bucket, cost: 1 }], 3)).map((d) => d.allowed)).toEqual([
        true,
        true,
        false,
      ]);
      const first = await once(log);
      expect(first.allowed).toBe(true);
      expect(first.outcomes[0]!.remaining).toBe(2);
      expect((await once(slots, "lease-a")).allowed).toBe(true);
      expect((await once(slots, "lease-b")).outcomes[0]!.remaining).toBe(0);
      const back = await once(bucket);
      expect(back.allowed).toBe(true);
      expect(back.outcomes[0]!.remaining).toBe(1);
      // A post-charge over another algorithm's state debits the new one from full.
      const charged = await store.charge([{ key, spec: log, cost: 1 }]);
      expect(charged[0]!.remaining).toBe(2);
    });
  });

  describe(`${name}: leaky bucket and concurrency`, () => {
    // One slot a second, not five: the state's expiry is set in Redis's own time (the queue's
    // drain plus at most the slack), while these cases move a clock of their own. At 200 ms a
    // slot the key lived 1.5 s of real time, and a loaded CI machine once took longer than that
    // to open the second instance's cluster connection: the later check found an empty queue.
    const leaky: LeakyBucketSpec = { algorithm: "leaky_bucket", name: "q.leaky", queue: 3, intervalMs: 1000 };
    const slots: ConcurrencySpec = {
      algorithm: "concurrency",
      name: "q.slots",
      maxInFlight: 2,
      leaseMs: 1000,
    };

    it("leaky bucket 1/s, queue 3: of 8 at once, 4 get slots 1 s apart, 4 are refused", async () => {
      const h = harness();
      const key = freshKey("leaky");
      const results = await sequential(await h.store(), [{ key, spec: leaky, cost: 1 }], 8, T0);
      expect(results.map((r) => r.allowed)).toEqual([true, true, true, true, false, false, false, false]);
      expect(results.slice(0, 4).map((r) => r.outcomes[0]!.delayMs ?? 0)).toEqual([0, 1000, 2000, 3000]);
      expect(results[0]!.outcomes[0]).toEqual({
        allowed: true,
        remaining: 3,
        resetMs: 1000,
        retryAfterMs: 0,
      });
      // Full: the next one fits when the first queued slot has drained.
      expect(results[4]!.outcomes[0]).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: 4000,
        retryAfterMs: 1000,
      });
      // A second later one more fits, at the back of the queue.
      const later = await (await h.store()).check([{ key, spec: leaky, cost: 1 }], { nowMs: T0 + 1000 });
      expect(later.outcomes[0]).toMatchObject({ allowed: true, delayMs: 3000 });
    });

    it("leaky bucket: 200 concurrent checks from several instances admit exactly queue + 1", async () => {
      const h = harness();
      const key = freshKey("leaky-burst");
      const stores = await Promise.all([h.store(), h.store(), h.store()]);
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          stores[i % 3]!.check([{ key, spec: leaky, cost: 1 }], { nowMs: T0 }),
        ),
      );
      const delays = results.filter((r) => r.allowed).map((r) => r.outcomes[0]!.delayMs ?? 0);
      expect(delays.sort((a, b) => a - b)).toEqual([0, 1000, 2000, 3000]);
    });

    it("concurrency: at most max_in_flight leases; a release frees a slot; a lease expires on its own", async () => {
      const h = harness();
      const key = freshKey("slots");
      const store = await h.store();
      const take = (lease: string, t: number) =>
        store.check([{ key, spec: slots, cost: 5, leaseId: lease }], { nowMs: T0 + t });
      expect((await take("a", 0)).outcomes[0]).toEqual({
        allowed: true,
        remaining: 1,
        resetMs: 1000,
        retryAfterMs: 0,
      });
      expect((await take("b", 100)).allowed).toBe(true);
      // Cost does not apply: one request holds one slot. Full: retry when the first lease could end.
      expect((await take("c", 200)).outcomes[0]).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: 900,
        retryAfterMs: 800,
      });
      await store.release([{ key, leaseId: "a", leaseMs: slots.leaseMs }]);
      expect((await take("d", 300)).allowed).toBe(true);
      expect((await take("e", 300)).allowed).toBe(false);
      // "b" was never released: it expires at 1100, and its slot with it.
      expect((await take("f", 1100)).allowed).toBe(true);
      expect((await take("g", 1100)).allowed).toBe(false);
    });

    it("concurrency: 200 concurrent checks from several instances admit exactly max_in_flight", async () => {
      const h = harness();
      const key = freshKey("slots-burst");
      const stores = await Promise.all([h.store(), h.store(), h.store()]);
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          stores[i % 3]!.check([{ key, spec: slots, cost: 1, leaseId: `l${i}` }]),
        ),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(2);
    });

    it("concurrency: a request denied by another limit takes no lease", async () => {
      const h = harness();
      const key = freshKey("slots-atomic");
      const bucket = `${key}:bucket`;
      const one: TokenBucketSpec = { ...LAB, name: "q.one", burst: 1, intervalMs: 60_000 };
      const store = await h.store();
      const both = (lease: string) => [
        { key, spec: slots, cost: 1, leaseId: lease },
        { key: bucket, spec: one, cost: 1 },
      ];
      expect((await store.check(both("a"), { nowMs: T0 })).allowed).toBe(true);
      expect((await store.check(both("b"), { nowMs: T0 })).allowed).toBe(false);
      // Only "a" holds a slot: one more fits.
      expect((await store.check([{ key, spec: slots, cost: 1, leaseId: "c" }], { nowMs: T0 })).allowed).toBe(
        true,
      );
    });

    it("concurrency keys expire once every lease has", async () => {
      const h = harness();
      const key = freshKey("slots-ttl");
      const short: ConcurrencySpec = { ...slots, leaseMs: 200 };
      await (await h.store()).check([{ key, spec: short, cost: 1, leaseId: "x" }]);
      const ttl = await h.pttl(key);
      expect(ttl).not.toBeNull();
      expect(ttl!).toBeLessThanOrEqual(1200);
      await h.advance(1300);
      expect(await h.pttl(key)).toBeNull();
    });
  });

  describe(`${name}: shadow limits, denial records and the admin reads`, () => {
    it("a shadow limit is evaluated and reported but never denies; it is charged only while it allows", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("shadow");
      const shadow: TokenBucketSpec = {
        ...LAB,
        name: "s.shadow",
        burst: 2,
        intervalMs: 60_000,
        shadow: true,
      };
      const results = await sequential(store, [{ key, spec: shadow, cost: 1 }], 4, T0);
      expect(results.map((r) => r.allowed)).toEqual([true, true, true, true]);
      expect(results.map((r) => r.outcomes[0]!.allowed)).toEqual([true, true, false, false]);
      expect(results[3]!.outcomes[0]).toMatchObject({ remaining: 0, retryAfterMs: 60_000 });
    });

    it("a denial is recorded from the call that decides it: the caller's log and the top list, by the time they are read", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("denied");
      const logKey = `${key}:log`;
      const topKey = `${key}:top`;
      const one: TokenBucketSpec = { ...LAB, name: "d.one", burst: 1, intervalMs: 60_000 };
      const wide: TokenBucketSpec = { ...LAB, name: "d.wide", burst: 100, intervalMs: 60_000 };
      const denial = { logKey, topKey, caller: "client:c1", route: "login" };
      const checks = [
        { key: `${key}:w`, spec: wide, cost: 1 },
        { key, spec: one, cost: 1 },
      ];
      for (let i = 0; i < 4; i++) await store.check(checks, { nowMs: T0 + i, denial });
      const denials = await store.denials(logKey);
      expect(denials).toEqual([
        { atMs: T0 + 3, route: "login", limits: ["d.one"] },
        { atMs: T0 + 2, route: "login", limits: ["d.one"] },
        { atMs: T0 + 1, route: "login", limits: ["d.one"] },
      ]);
      expect(await store.topDenials([topKey, `${topKey}:older`], 5)).toEqual([
        { caller: "client:c1", count: 3 },
      ]);
      // Reads consume nothing: twice the same.
      const peeked = await store.peek(checks, { nowMs: T0 + 3 });
      expect(peeked).toEqual([
        { remaining: 99, resetMs: 59_997 },
        { remaining: 0, resetMs: 59_997 },
      ]);
      expect(await store.peek(checks, { nowMs: T0 + 3 })).toEqual(peeked);
      expect(await store.reset([key, `${key}:w`, logKey])).toBe(3);
      expect(await store.denials(logKey)).toEqual([]);
      expect((await store.check(checks, { nowMs: T0 + 4 })).allowed).toBe(true);
    });
  });

  describe(`${name}: lease renewal`, () => {
    it("a renewed lease outlives its first expiry; a released one is not brought back", async () => {
      const h = harness();
      const store = await h.store();
      const key = freshKey("renew");
      const one: ConcurrencySpec = { algorithm: "concurrency", name: "r.one", maxInFlight: 1, leaseMs: 1000 };
      const take = (lease: string, t: number) =>
        store.check([{ key, spec: one, cost: 1, leaseId: lease }], { nowMs: T0 + t });
      expect((await take("a", 0)).allowed).toBe(true);
      await store.renew([{ key, leaseId: "a", leaseMs: 1000 }], { nowMs: T0 + 800 });
      // Past the first expiry (1000), still held until 1800.
      expect((await take("b", 1500)).allowed).toBe(false);
      expect((await take("c", 1800)).allowed).toBe(true);
      await store.release([{ key, leaseId: "c", leaseMs: 1000 }]);
      await store.renew([{ key, leaseId: "c", leaseMs: 1000 }], { nowMs: T0 + 1900 });
      expect((await take("d", 1900)).allowed).toBe(true);
    });
  });
}
