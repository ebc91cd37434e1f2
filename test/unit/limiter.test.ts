// The gateway's limiter against a memory store on an injected clock: which limits apply, what the
// decision says, where denials are written, and the answer when the store cannot give one.
import { describe, expect, it } from "vitest";
import type { CompiledPlan } from "../../src/config/compile.js";
import { BreakerOpenError, StoreTimeoutError } from "../../src/errors.js";
import type { Caller } from "../../src/identity/caller.js";
import { compiledLimit } from "../../src/limits/compiled.js";
import type { LimitDecision } from "../../src/limits/decision.js";
import { createGatewayLimiter } from "../../src/limits/gateway-limiter.js";
import { scopeBy } from "../../src/limits/key-by.js";
import { Limiter } from "../../src/limits/limiter.js";
import type { FailurePolicy, LimitScope, PlannedLimit } from "../../src/limits/plan.js";
import type { LimitSpec } from "../../src/limits/spec.js";
import { type LimitStore, TOP_BUCKET_MS } from "../../src/limits/stores/contract.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";

const T0 = 1_699_999_200_000; // a whole hour: fixed windows start here

const spec = {
  minute: { algorithm: "fixed_window", name: "p.minute", limit: 2, windowMs: 60_000 },
  hour: { algorithm: "fixed_window", name: "p.hour", limit: 1, windowMs: 3_600_000 },
  shadow: { algorithm: "fixed_window", name: "p.shadow", limit: 1, windowMs: 60_000, shadow: true },
  queue: { algorithm: "leaky_bucket", name: "p.queue", queue: 3, intervalMs: 100 },
  slots: { algorithm: "concurrency", name: "p.slots", maxInFlight: 4, leaseMs: 10_000 },
  tenant: { algorithm: "fixed_window", name: "p.tenant", limit: 100, windowMs: 60_000 },
} satisfies Record<string, LimitSpec>;

function planOf(routes: Record<string, [LimitSpec, LimitScope?, boolean?][]>): CompiledPlan {
  const limitsByRoute = new Map<string, PlannedLimit[]>();
  for (const [route, limits] of Object.entries(routes)) {
    limitsByRoute.set(
      route,
      limits.map(([s, scope = "caller", tenantOnly = false]) => ({
        ...compiledLimit(s, 0.5),
        by: scopeBy(scope),
        tenantOnly,
      })),
    );
  }
  return { name: "p", limitsByRoute, limits: [...limitsByRoute.values()].flat() };
}

const plan = planOf({
  search: [[spec.minute], [spec.tenant, "tenant", true]],
  strict: [[spec.hour], [spec.minute]],
  shadowed: [[spec.shadow]],
  queued: [[spec.queue]],
  slotted: [[spec.slots]],
  tenantOnly: [[spec.tenant, "tenant", true]],
});
const alice: Caller = { kind: "client", id: "alice", plan, tenant: "acme", ipKey: "192.0.2.1" };
const solo: Caller = { kind: "client", id: "solo", plan, tenant: undefined, ipKey: "192.0.2.2" };
const route = (name: string, onFailure: FailurePolicy = "open") => ({ name, cost: 1, onFailure, limits: [] });

function setup(options: { denyCache?: boolean } = {}) {
  const clock = { now: T0 };
  const now = () => clock.now;
  const store = new MemoryStore({ sweepIntervalMs: 0, now });
  let checks = 0;
  const counting = Object.assign(Object.create(store) as MemoryStore, {
    check: (...args: Parameters<MemoryStore["check"]>) => {
      checks++;
      return store.check(...args);
    },
  });
  const limiter = createGatewayLimiter({
    store: counting,
    prefix: "t:",
    denyCache: options.denyCache ?? false,
    now,
  });
  return { limiter, store, clock, storeChecks: () => checks };
}

function failing(err: Error): LimitStore {
  return {
    kind: "redis",
    check: () => Promise.reject(err),
    charge: () => Promise.reject(err),
    release: () => Promise.reject(err),
    refund: () => Promise.reject(err),
    renew: () => Promise.reject(err),
  };
}

function expectKind<K extends LimitDecision["kind"]>(
  d: LimitDecision,
  kind: K,
): Extract<LimitDecision, { kind: K }> {
  expect(d.kind).toBe(kind);
  return d as Extract<LimitDecision, { kind: K }>;
}

describe("Limiter", () => {
  it("is unlimited without a plan, a route in it, or a limit that binds the caller", async () => {
    const { limiter, storeChecks } = setup();
    const anonymous: Caller = { kind: "anonymous", plan: undefined, ipKey: "192.0.2.9" };
    expect(await limiter.check(anonymous, route("search"))).toEqual({ kind: "unlimited" });
    expect(await limiter.check(alice, route("elsewhere"))).toEqual({ kind: "unlimited" });
    expect(await limiter.check(solo, route("tenantOnly"))).toEqual({ kind: "unlimited" });
    expect(storeChecks()).toBe(0);
  });

  it("answers a request no limit binds at once, without a promise, and one a limit binds with one", () => {
    const { limiter } = setup();
    // The pipeline goes on in the same turn for the first: no microtask per unlimited request.
    expect(limiter.check(alice, route("elsewhere"))).toEqual({ kind: "unlimited" });
    expect(limiter.check(alice, route("search"))).toBeInstanceOf(Promise);
  });

  it("allows with every applied limit, its compiled description, and the checks for a post-charge", async () => {
    const { limiter } = setup();
    const d = expectKind(await limiter.check(alice, route("search")), "allowed");
    expect(d.checks.map((c) => c.key)).toEqual(["t:{t:acme}:c:alice:p.minute", "t:{t:acme}:p.tenant"]);
    expect(d.applied.map((a) => [a.limit.description, a.spec === a.limit.spec, a.outcome.remaining])).toEqual(
      [
        ['"p.minute" allows 2 requests per 1m', true, 1],
        ['"p.tenant" allows 100 requests per 1m', true, 99],
      ],
    );
    expect(d.delayMs).toBe(0);
    expect(d.release).toBeUndefined();
    // A caller without a tenant: the plan's tenant limit does not apply; the pairing holds.
    const s = expectKind(await limiter.check(solo, route("search")), "allowed");
    expect(s.applied.map((a) => a.limit.spec.name)).toEqual(["p.minute"]);
  });

  it("denies with the violated limits and the longest wait, written to the caller's log by the same call", async () => {
    const { limiter, store, storeChecks } = setup();
    await limiter.check(alice, route("strict"));
    const d = expectKind(await limiter.check(alice, route("strict")), "denied");
    expect(d.violated.map((v) => v.limit.spec.name)).toEqual(["p.hour"]);
    expect(d.applied).toHaveLength(2);
    expect(d.retryAfterMs).toBe(3_600_000);
    expect(d.local).toBeUndefined();
    expect(storeChecks()).toBe(2);
    expect(await store.denials("t:{t:acme}:c:alice:denials")).toEqual([
      { atMs: T0, route: "strict", limits: ["p.hour"] },
    ]);
    const bucket = Math.floor(T0 / TOP_BUCKET_MS) * TOP_BUCKET_MS;
    expect(await store.topDenials([`t:{denials}:top:${bucket}`], 5)).toEqual([
      { caller: "client:alice", count: 1 },
    ]);
  });

  it("lets a shadow limit's denial through, reported", async () => {
    const { limiter } = setup();
    await limiter.check(alice, route("shadowed"));
    const d = expectKind(await limiter.check(alice, route("shadowed")), "allowed");
    expect(d.shadowLimited?.map((a) => a.limit.spec.name)).toEqual(["p.shadow"]);
  });

  it("tells how long a leaky bucket holds the request", async () => {
    const { limiter } = setup();
    await limiter.check(alice, route("queued"));
    expect(expectKind(await limiter.check(alice, route("queued")), "allowed").delayMs).toBe(100);
  });

  it("holds concurrency slots until released, once", async () => {
    const { limiter } = setup();
    const held = [];
    for (let i = 0; i < 4; i++)
      held.push(expectKind(await limiter.check(alice, route("slotted")), "allowed"));
    expect((await limiter.check(alice, route("slotted"))).kind).toBe("denied");
    expect(await held[0]!.release!()).toEqual({ ok: true });
    expect(await held[0]!.release!()).toEqual({ ok: true });
    expect((await limiter.check(alice, route("slotted"))).kind).toBe("allowed");
    expect((await limiter.check(alice, route("slotted"))).kind).toBe("denied");
  });

  it("answers a store that cannot with the route's policy and the failure's reason", async () => {
    const limiter = new Limiter({ store: failing(new StoreTimeoutError(50)), prefix: "t:" });
    expect(await limiter.check(alice, route("search", "open"))).toMatchObject({
      kind: "degraded",
      reason: "timeout",
      policy: "open",
    });
    const closed = new Limiter({ store: failing(new BreakerOpenError()), prefix: "t:" });
    expect(await closed.check(alice, route("search", "closed"))).toMatchObject({
      kind: "degraded",
      reason: "breaker_open",
      policy: "closed",
    });
    // Anything that is no StoreError is a lost connection; on_failure: local without a decider is open.
    const lost = await limiter.check(alice, route("search", "local"));
    expect(lost).toMatchObject({ kind: "degraded", policy: "open", reason: "timeout" });
    const plain = new Limiter({ store: failing(new Error("socket hang up")), prefix: "t:" });
    expect(await plain.check(alice, route("search"))).toMatchObject({ reason: "connection" });
  });

  it("decides alone with the local shares under on_failure: local, and gives leases back there", async () => {
    const local = new MemoryStore({ sweepIntervalMs: 0, now: () => T0 });
    const limiter = new Limiter({ store: failing(new StoreTimeoutError(50)), prefix: "t:", local });
    const first = expectKind(await limiter.check(alice, route("strict", "local")), "allowed");
    expect(first.degraded).toBe("timeout");
    // Each applied limit is the planned limit's local share, as compiled, spec and facts alike.
    const plannedLimits = route("strict", "local").name;
    const shares = plan.limitsByRoute.get(plannedLimits)!.map((p) => p.local);
    expect(first.applied.map((a) => a.limit)).toEqual(shares);
    expect(first.applied.every((a) => a.spec === a.limit.spec)).toBe(true);
    // p.minute's share is 1 of 2.
    const second = expectKind(await limiter.check(alice, route("strict", "local")), "denied");
    expect(second.degraded).toBe("timeout");
    expect(second.violated.map((v) => v.limit.spec.name)).toEqual(["p.hour", "p.minute"]);

    const slots = [];
    for (let i = 0; i < 2; i++)
      slots.push(expectKind(await limiter.check(alice, route("slotted", "local")), "allowed"));
    expect((await limiter.check(alice, route("slotted", "local"))).kind).toBe("denied");
    expect(await slots[0]!.release!()).toEqual({ ok: true }); // given back to the local store
    expect((await limiter.check(alice, route("slotted", "local"))).kind).toBe("allowed");
  });

  it("with the deny cache: repeats are denied locally, recorded at the flush, forgotten on a reset", async () => {
    const { limiter, store, clock, storeChecks } = setup({ denyCache: true });
    await limiter.check(alice, route("strict"));
    await limiter.check(alice, route("strict"));
    expect(storeChecks()).toBe(2);
    clock.now += 1000;
    const d = expectKind(await limiter.check(alice, route("strict")), "denied");
    expect(d.local).toBe(true);
    expect(storeChecks()).toBe(2);
    // Only what the cache denied: nothing is known of the other limit.
    expect(d.applied.map((a) => a.limit.spec.name)).toEqual(["p.hour"]);
    expect(d.violated).toEqual(d.applied);
    expect(d.retryAfterMs).toBe(3_600_000 - 1000);

    expect(await store.denials("t:{t:acme}:c:alice:denials")).toHaveLength(1);
    await limiter.flushDenials();
    expect(await store.denials("t:{t:acme}:c:alice:denials")).toHaveLength(2);

    limiter.forgetDenials(["t:{t:acme}:c:alice:p.hour"]);
    expect((await limiter.check(alice, route("strict"))).kind).toBe("denied");
    expect(storeChecks()).toBe(3);
    await limiter.check(alice, route("strict"));
    await limiter.close(); // a last flush
    expect(await store.denials("t:{t:acme}:c:alice:denials")).toHaveLength(4);
  });

  it("post-charges the admitted checks, reporting a failure instead of throwing it", async () => {
    const { limiter } = setup();
    const d = expectKind(await limiter.check(alice, route("search")), "allowed");
    expect(await limiter.postCharge(d.checks, 5)).toEqual({
      ok: true,
      charged: [
        { remaining: 0, resetMs: 60_000 },
        { remaining: 94, resetMs: 60_000 },
      ],
    });
    const down = new Limiter({ store: failing(new StoreTimeoutError(50)), prefix: "t:" });
    expect(await down.postCharge(d.checks, 5)).toEqual({ ok: false, reason: "timeout" });
  });
});
