// `batch: N` reservations in front of a store: tokens come from the store N at a time, requests
// are served from what is kept, one refill per key at a time, denied requests give back, and what
// is kept expires after RESERVATION_MS.
import { describe, expect, it } from "vitest";
import { RESERVATION_MS, RESERVATIONS_MAX, ReservationStore } from "../../src/limits/reservations.js";
import type { LimitCheck, LimitSpec, StoreDecision } from "../../src/limits/spec.js";
import type { CheckOptions, LimitStore } from "../../src/limits/stores/contract.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";

const batched: LimitSpec = {
  algorithm: "token_bucket",
  name: "p.hot",
  burst: 100,
  intervalMs: 3_600_000,
  batch: 10,
};
const once: LimitSpec = { algorithm: "fixed_window", name: "p.once", limit: 1, windowMs: 3_600_000 };
const T0 = 1_700_000_000_000;

function setup(gate?: Promise<void>) {
  let now = T0;
  const store = new MemoryStore({ sweepIntervalMs: 0, now: () => now });
  const sent: LimitCheck[][] = [];
  const counting = Object.assign(Object.create(store) as MemoryStore, {
    check: async (checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> => {
      sent.push([...checks]);
      await gate;
      return store.check(checks, options);
    },
  });
  const reservations = new ReservationStore(counting, { now: () => now });
  return { reservations, sent, advance: (ms: number) => (now += ms) };
}

const hot = (cost = 1): LimitCheck => ({ key: "t:{c:a}:p.hot", spec: batched, cost });
const onceCheck = (): LimitCheck => ({ key: "t:{c:a}:p.once", spec: once, cost: 1 });

describe("reservations", () => {
  it("take a batch from the store and serve the next requests from it", async () => {
    const { reservations, sent } = setup();
    const first = await reservations.check([hot()]);
    expect(first).toMatchObject({ allowed: true, outcomes: [{ remaining: 90, taken: 10 }] });
    expect(sent[0]![0]!.batch).toBe(10); // the check asked for a batch
    for (let i = 1; i < 10; i++) {
      const d = await reservations.check([hot()]);
      // The store's remaining when the batch was taken, plus what this instance still holds.
      expect(d).toEqual({
        allowed: true,
        outcomes: [{ allowed: true, remaining: 90 + 9 - i, resetMs: expect.any(Number), retryAfterMs: 0 }],
      });
    }
    expect(sent).toHaveLength(1);
    await reservations.check([hot()]);
    expect(sent).toHaveLength(2); // the reservation ran out: the next batch
  });

  it("let requests wait for the refill in flight instead of each taking a batch", async () => {
    let open!: () => void;
    const { reservations, sent } = setup(new Promise((resolve) => (open = resolve)));
    const all = Promise.all(Array.from({ length: 5 }, () => reservations.check([hot()])));
    await Promise.resolve();
    open();
    const decisions = await all;
    expect(decisions.every((d) => d.allowed)).toBe(true);
    expect(sent).toHaveLength(1);
  });

  it("release the waiters of a refill the store denied together, not one refill at a time", async () => {
    // An empty bucket: every refill is denied. Before, each waiter woke to start a refill of its
    // own, so 64 requests went to the store one at a time, each woken once per waiter ahead.
    const empty: LimitSpec = { ...batched, burst: 1 };
    let now = T0;
    const store = new MemoryStore({ sweepIntervalMs: 0, now: () => now });
    await store.check([{ key: "t:{c:a}:p.hot", spec: empty, cost: 1 }]);
    let inFlight = 0;
    let most = 0;
    const sent: LimitCheck[][] = [];
    const slow = Object.assign(Object.create(store) as MemoryStore, {
      check: async (checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> => {
        sent.push(checks.map((c) => ({ ...c })));
        most = Math.max(most, ++inFlight);
        await new Promise((r) => setTimeout(r, 1));
        inFlight--;
        return store.check(checks, options);
      },
    });
    const reservations = new ReservationStore(slow, { now: () => now });
    const hotEmpty = (): LimitCheck => ({ key: "t:{c:a}:p.hot", spec: empty, cost: 1 });
    const decisions = await Promise.all(Array.from({ length: 64 }, () => reservations.check([hotEmpty()])));
    expect(decisions.every((d) => !d.allowed)).toBe(true);
    expect(sent).toHaveLength(64);
    expect(sent[0]![0]!.batch).toBe(10); // the one refill
    expect(sent.slice(1).every(([c]) => c!.batch === undefined)).toBe(true); // then unbatched
    expect(most).toBe(63); // all at once, after the refill
    // Until the bucket has a token again the key is dry: checked unbatched, no refill to wait for.
    await reservations.check([hotEmpty()]);
    expect(sent.at(-1)![0]!.batch).toBeUndefined();
    now += batched.intervalMs;
    expect((await reservations.check([hotEmpty()])).allowed).toBe(true);
    expect(sent.at(-1)![0]!.batch).toBe(10); // a token again: batched again
  });

  it("give the reserved tokens back when another limit denies the request", async () => {
    const { reservations } = setup();
    await reservations.check([hot(), onceCheck()]); // takes a batch, keeps 9
    const denied = await reservations.check([hot(), onceCheck()]);
    expect(denied.allowed).toBe(false);
    // Served from the reservation, then given back: 9 still held.
    const next = await reservations.check([hot()]);
    expect(next.outcomes[0]!.remaining).toBe(90 + 8);
  });

  it("put the reserved outcomes back in their places among the store's", async () => {
    const { reservations } = setup();
    await reservations.check([hot()]);
    const d = await reservations.check([onceCheck(), hot()]);
    expect(d.allowed).toBe(true);
    expect(d.outcomes.map((o) => o.remaining)).toEqual([0, 90 + 8]);
  });

  it("expire after RESERVATION_MS", async () => {
    const { reservations, sent, advance } = setup();
    await reservations.check([hot()]);
    advance(RESERVATION_MS - 1);
    await reservations.check([hot()]);
    expect(sent).toHaveLength(1);
    advance(1);
    const d = await reservations.check([hot()]);
    expect(sent).toHaveLength(2);
    // The store had 90 and gives 10 more; the 8 left unused are gone with their reservation.
    expect(d.outcomes[0]).toMatchObject({ remaining: 80, taken: 10 });
  });

  it("give back and end the refill when the store fails", async () => {
    const failing: LimitStore = {
      kind: "redis",
      check: () => Promise.reject(new Error("down")),
      charge: () => Promise.reject(new Error("down")),
      release: () => Promise.resolve(),
      refund: () => Promise.resolve(),
      renew: () => Promise.resolve(),
    };
    const reservations = new ReservationStore(failing, { now: () => T0 });
    await expect(reservations.check([hot()])).rejects.toThrow("down");
    // No refill left in flight: the next request is not stuck behind it.
    await expect(reservations.check([hot()])).rejects.toThrow("down");
  });

  it("pass requests without a batched limit straight to the store", () => {
    const answer = Promise.resolve({ allowed: true, outcomes: [] });
    const inner: LimitStore = {
      kind: "redis",
      check: () => answer,
      charge: () => Promise.resolve([]),
      release: () => Promise.resolve(),
      refund: () => Promise.resolve(),
      renew: () => Promise.resolve(),
    };
    expect(new ReservationStore(inner, { now: () => T0 }).check([onceCheck()])).toBe(answer);
  });

  it(`hold at most RESERVATIONS_MAX keys, dropping the oldest`, async () => {
    const asked: string[] = [];
    const inner: LimitStore = {
      kind: "redis",
      check: (checks) => {
        for (const c of checks) asked.push(c.key);
        return Promise.resolve({
          allowed: true,
          outcomes: checks.map((c) => ({
            allowed: true,
            remaining: 0,
            resetMs: 0,
            retryAfterMs: 0,
            taken: c.batch,
          })),
        });
      },
      charge: () => Promise.resolve([]),
      release: () => Promise.resolve(),
      refund: () => Promise.resolve(),
      renew: () => Promise.resolve(),
    };
    const reservations = new ReservationStore(inner, { now: () => T0 });
    const on = (i: number): LimitCheck => ({ key: `k${i}`, spec: batched, cost: 1 });
    for (let i = 0; i <= RESERVATIONS_MAX; i++) await reservations.check([on(i)]);
    expect(reservations.size).toBe(RESERVATIONS_MAX);
    asked.length = 0;
    await reservations.check([on(1)]);
    await reservations.check([on(0)]);
    expect(asked).toEqual(["k0"]);
  });
});
