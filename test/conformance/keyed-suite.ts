// Keyed limits and route budgets through the real Limiter, on every store: one runtime compiled
// from YAML, callers built by hand, each test under a prefix of its own. Counts are exact: a
// route budget, or a keyed limit per value, admits exactly its limit however many callers and
// instances race for it. On one Redis and in memory a request is decided by one atomic call, so a
// denial's answer reports the other limits untouched; on a cluster the caller's limits and a
// route budget sit in different slots and a later slot's denial gives back what the first took,
// so only the state once the requests are answered is compared there (peeked).
import { describe, expect, it } from "vitest";
import { type CompiledRoute, compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import type { Caller } from "../../src/identity/caller.js";
import type { LimitDecision } from "../../src/limits/decision.js";
import type { KeyedRequest } from "../../src/limits/key-by.js";
import { Limiter, limitChecks } from "../../src/limits/limiter.js";
import { denialLogKey } from "../../src/limits/state-keys.js";
import type { Store } from "../../src/limits/stores/contract.js";

export interface KeyedHarness {
  /** A fresh store sharing state with every other store of this harness (another "instance"). */
  store(): Promise<Store>;
  /** One call decides every limit of a request (memory, one Redis); false on a cluster. */
  atomic: boolean;
  /** The Redis Cluster slot of a key, where there are slots. */
  slotOf?(key: string): number;
}

const CONFIG = `
listen: 127.0.0.1:0
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
identity: { jwt: { secret: keyed-conformance-secret-keyed-conformance, default_plan: free } }
plans:
  anonymous: {}
  free:
    global: { rate: 1/h, burst: 1000 }
    routes:
      reports: { algorithm: sliding_window, limit: 3, window: 1h, by: "segment:3" }
      claims: { rate: 1/h, burst: 3, by: "claim:org" }
      models: { rate: 1/h, burst: 3, by: [caller, "header:x-model"] }
      tight: { rate: 1/h, burst: 5 }
      roomy: { rate: 1/h, burst: 1 }
routes:
  - name: search
    match: { path: /v1/search }
    upstream: api
    limits: { total: { rate: 1/h, burst: 10 } }
  - name: orgs
    match: { path: /v1/orgs }
    upstream: api
    limits: { per-org: { algorithm: fixed_window, limit: 3, window: 1h, by: "header:x-org-id" } }
  - { name: reports, match: { path: /v1/reports }, upstream: api }
  - { name: claims, match: { path: /v1/claims }, upstream: api }
  - { name: models, match: { path: /v1/models }, upstream: api }
  - name: tight
    match: { path: /v1/tight }
    upstream: api
    limits: { budget: { rate: 1/h, burst: 1 } }
  - name: roomy
    match: { path: /v1/roomy }
    upstream: api
    limits: { budget: { rate: 1/h, burst: 5 } }
`;

const loaded = loadConfigText(CONFIG, "keyed.yaml", {});
if (!loaded.ok) throw new Error(`keyed fixture invalid: ${JSON.stringify(loaded.problems)}`);
const runtime = compileRuntime(loaded.config, { file: "keyed.yaml", version: loaded.version });
const free = runtime.plans.get("free")!;
const anonymousPlan = runtime.anonymousPlan!;

const route = (name: string): CompiledRoute => runtime.routeList.find((r) => r.name === name)!;
const client = (id: string, claims?: Record<string, unknown>): Caller => ({
  kind: "client",
  id,
  plan: free,
  tenant: undefined,
  ipKey: "192.0.2.1",
  ...(claims ? { claims } : {}),
});
const anonymous = (ip: string): Caller => ({ kind: "anonymous", plan: anonymousPlan, ipKey: ip });
const request = (path: string, headers: Record<string, string> = {}): KeyedRequest => ({
  headers,
  path,
  query: "",
});

const alice = client("alice");
const bob = client("bob");

let prefixSeq = 0;

/** Three limiters ("instances") over the harness's stores, under a prefix no other test uses. */
async function instances(h: KeyedHarness) {
  const prefix = `test:keyed-${process.pid}-${++prefixSeq}:`;
  const stores = await Promise.all([h.store(), h.store(), h.store()]);
  const limiters = stores.map((store) => new Limiter({ store, prefix }));
  const planned = (caller: Caller, r: CompiledRoute) => caller.plan?.limitsByRoute.get(r.name) ?? r.limits;
  return {
    check(i: number, caller: Caller, routeName: string, req: KeyedRequest): Promise<LimitDecision> {
      return Promise.resolve(limiters[i % limiters.length]!.check(caller, route(routeName), req));
    },
    /** The request's state keys, by limit name. */
    keys(caller: Caller, routeName: string, req: KeyedRequest): Record<string, string> {
      const r = route(routeName);
      const checks = limitChecks(prefix, planned(caller, r), caller, r, req);
      return Object.fromEntries(checks.map((c) => [c.spec.name, c.key]));
    },
    /**
     * The caller's denial log, newest first, once every instance has written what it decided (a
     * store's read writes its own first; Redis instances write each other's within a second).
     */
    async denials(caller: Caller) {
      const key = denialLogKey(prefix, caller);
      for (const s of stores.slice(1)) await s.denials(key);
      return stores[0]!.denials(key);
    },
    /** What each limit of the request has left, looked at without taking (peek). */
    async left(caller: Caller, routeName: string, req: KeyedRequest): Promise<Record<string, number>> {
      const r = route(routeName);
      const checks = limitChecks(prefix, planned(caller, r), caller, r, req);
      const peeked = await stores[0]!.peek(checks.map((c) => ({ ...c, cost: 0 })));
      return Object.fromEntries(checks.map((c, i) => [c.spec.name, peeked[i]!.remaining]));
    },
  };
}

/** Every check here is decided by the store: a degraded answer (the store failed) is a failure. */
function decided(decision: LimitDecision): LimitDecision & { kind: "allowed" | "denied" } {
  if (decision.kind !== "allowed" && decision.kind !== "denied") {
    throw new Error(`not decided: ${decision.kind} ${"error" in decision ? decision.error.message : ""}`);
  }
  return decision;
}

function remaining(decision: LimitDecision, name: string): number {
  const applied = decided(decision).applied.find((a) => a.spec.name === name);
  if (!applied) throw new Error(`${name} did not apply`);
  return applied.outcome.remaining;
}

const violated = (d: LimitDecision) => (d.kind === "denied" ? d.violated.map((v) => v.spec.name) : []);

/** How many of `decisions` were allowed, grouped by `label` of the request that got each. */
function allowedBy(decisions: LimitDecision[], label: (i: number) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  decisions.forEach((d, i) => {
    counts[label(i)] ??= 0;
    if (decided(d).kind === "allowed") counts[label(i)]!++;
  });
  return counts;
}

export function keyedConformance(name: string, harness: () => KeyedHarness) {
  describe(`${name}: keyed limits and route budgets through the Limiter`, () => {
    it("a route budget shared by clients and anonymous callers admits exactly its limit under concurrency", async () => {
      const h = harness();
      const gw = await instances(h);
      const callers = [
        ...["c1", "c2", "c3", "c4", "c5"].map((id) => client(id)),
        ...[1, 2, 3, 4, 5].map((n) => anonymous(`198.51.100.${n}`)),
      ];
      const req = request("/v1/search");
      const decisions = await Promise.all(
        Array.from({ length: 200 }, (_, i) => gw.check(i, callers[i % callers.length]!, "search", req)),
      );
      const allowed = decisions.filter((d) => decided(d).kind === "allowed");
      expect(allowed).toHaveLength(10);
      expect(allowed.map((d) => remaining(d, "search.total")).sort((a, b) => a - b)).toEqual([
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
      ]);
      for (const d of decisions.filter((x) => x.kind === "denied"))
        expect(violated(d)).toEqual(["search.total"]);
      // Anonymous callers took from it as clients did: one key for all of them.
      const budget = gw.keys(client("c1"), "search", req)["search.total"];
      expect(gw.keys(anonymous("198.51.100.1"), "search", req)["search.total"]).toBe(budget);
      expect(budget).toMatch(/\{search\.total:r=search\}$/);
      // A client's own limits took one unit per admitted request of its own, none for the denied.
      const c1Allowed = decisions.filter((d, i) => i % callers.length === 0 && d.kind === "allowed").length;
      expect((await gw.left(client("c1"), "search", req))["free.global"]).toBe(1000 - c1Allowed);
      if (h.slotOf) {
        // On a cluster the budget is a slot apart from the callers' own limits.
        expect(h.slotOf(budget!)).not.toBe(h.slotOf(gw.keys(client("c1"), "search", req)["free.global"]!));
      }
    });

    it("a header-keyed limit admits exactly its limit per value, and values are independent", async () => {
      const gw = await instances(harness());
      const values = ["org-a", "org:{b}%"];
      const callers = [alice, bob, anonymous("198.51.100.20"), anonymous("198.51.100.21")];
      const decisions = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          gw.check(i, callers[i % 4]!, "orgs", request("/v1/orgs", { "x-org-id": values[i % 2]! })),
        ),
      );
      expect(allowedBy(decisions, (i) => values[i % 2]!)).toEqual({ "org-a": 3, "org:{b}%": 3 });
      for (const d of decisions.filter((x) => x.kind === "denied"))
        expect(violated(d)).toEqual(["orgs.per-org"]);
      // A third value, long enough to be hashed, has its own full budget.
      const long = `org-${"x".repeat(100)}`;
      const fresh = await gw.check(0, alice, "orgs", request("/v1/orgs", { "x-org-id": long }));
      expect(remaining(fresh, "orgs.per-org")).toBe(2);
      const keys = [...values, long].map((v) =>
        gw.keys(alice, "orgs", request("/v1/orgs", { "x-org-id": v })),
      );
      expect(new Set(keys.map((k) => k["orgs.per-org"])).size).toBe(3);
    });

    it("a missing header keys by the caller: two callers without it do not share", async () => {
      const gw = await instances(harness());
      const callers = [alice, bob, anonymous("198.51.100.30"), anonymous("198.51.100.31")];
      const labels = ["alice", "bob", "ip-30", "ip-31", "alice with org-a"];
      const decisions = await Promise.all(
        Array.from({ length: 50 }, (_, i) => {
          const who = i % 5;
          if (who === 4) return gw.check(i, alice, "orgs", request("/v1/orgs", { "x-org-id": "org-a" }));
          return gw.check(
            i,
            callers[who]!,
            "orgs",
            request("/v1/orgs", who === 1 ? { "x-org-id": " " } : {}),
          );
        }),
      );
      expect(allowedBy(decisions, (i) => labels[i % 5]!)).toEqual({
        alice: 3,
        bob: 3,
        "ip-30": 3,
        "ip-31": 3,
        "alice with org-a": 3,
      });
    });

    it("a segment-keyed limit admits exactly its limit per segment value; a path without it keys by caller", async () => {
      const gw = await instances(harness());
      const paths = ["/v1/reports/r-1", "/v1/reports/r-2/pdf", "/v1/reports"];
      const callers = [alice, bob, client("carol")];
      const decisions = await Promise.all(
        Array.from({ length: 60 }, (_, i) => gw.check(i, callers[i % 3]!, "reports", request(paths[i % 2]!))),
      );
      expect(allowedBy(decisions, (i) => paths[i % 2]!)).toEqual({
        "/v1/reports/r-1": 3,
        "/v1/reports/r-2/pdf": 3,
      });
      for (const d of decisions.filter((x) => x.kind === "denied"))
        expect(violated(d)).toEqual(["free.reports"]);
      const bare = await Promise.all(
        Array.from({ length: 10 }, (_, i) => gw.check(i, i % 2 ? bob : alice, "reports", request(paths[2]!))),
      );
      expect(allowedBy(bare, (i) => (i % 2 ? "bob" : "alice"))).toEqual({ alice: 3, bob: 3 });
    });

    it("a claim-keyed limit admits exactly its limit per claim value; a caller without claims keys by itself", async () => {
      const gw = await instances(harness());
      const orgs = ["o-1", "o-2"];
      const callers = Array.from({ length: 6 }, (_, i) =>
        client(`jwt:u${i}`, { sub: `u${i}`, org: orgs[i % 2] }),
      );
      const req = request("/v1/claims");
      const decisions = await Promise.all(
        Array.from({ length: 60 }, (_, i) => gw.check(i, callers[i % 6]!, "claims", req)),
      );
      expect(allowedBy(decisions, (i) => orgs[i % 2]!)).toEqual({ "o-1": 3, "o-2": 3 });
      const keyless = await Promise.all(
        Array.from({ length: 10 }, (_, i) => gw.check(i, i % 2 ? bob : alice, "claims", req)),
      );
      expect(allowedBy(keyless, (i) => (i % 2 ? "bob" : "alice"))).toEqual({ alice: 3, bob: 3 });
    });

    it("a composite [caller, header:x-model] limit is per (caller, value), in the caller's slot", async () => {
      const h = harness();
      const gw = await instances(h);
      const pairs: [Caller, string, string][] = [
        [alice, "m1", "alice/m1"],
        [alice, "m2", "alice/m2"],
        [bob, "m1", "bob/m1"],
      ];
      const decisions = await Promise.all(
        Array.from({ length: 60 }, (_, i) => {
          const [caller, model] = pairs[i % 3]!;
          return gw.check(i, caller, "models", request("/v1/models", { "x-model": model }));
        }),
      );
      expect(allowedBy(decisions, (i) => pairs[i % 3]![2])).toEqual({
        "alice/m1": 3,
        "alice/m2": 3,
        "bob/m1": 3,
      });
      if (h.slotOf) {
        const keys = gw.keys(alice, "models", request("/v1/models", { "x-model": "m1" }));
        expect(h.slotOf(keys["free.models"]!)).toBe(h.slotOf(keys["free.global"]!));
      }
    });

    it("a denial by the route budget takes nothing from the caller's own limits", async () => {
      const h = harness();
      const gw = await instances(h);
      const req = request("/v1/tight");
      // Caller's limit 5, route budget 1 shared.
      const first = await gw.check(0, alice, "tight", req);
      expect(first.kind).toBe("allowed");
      expect(remaining(first, "free.tight")).toBe(4);
      expect(remaining(first, "tight.budget")).toBe(0);
      for (let i = 0; i < 3; i++) {
        const denied = await gw.check(i, alice, "tight", req);
        expect(violated(denied)).toEqual(["tight.budget"]);
        // One call decided it: the caller's limit reports what it has now, nothing taken.
        if (h.atomic) expect(remaining(denied, "free.tight")).toBe(4);
      }
      // Each denial is in the caller's log, under the budget's name. An anonymous caller has the
      // budget alone (its plan has no limit here), a slot apart from its log on a cluster.
      const tightDenial = { route: "tight", limits: ["tight.budget"] };
      expect(await gw.denials(alice)).toMatchObject([tightDenial, tightDenial, tightDenial]);
      const stranger = anonymous("198.51.100.40");
      expect(violated(await gw.check(1, stranger, "tight", req))).toEqual(["tight.budget"]);
      expect(await gw.denials(stranger)).toMatchObject([tightDenial]);
      // Concurrent denials from every instance, a new caller among them.
      const burst = await Promise.all(
        Array.from({ length: 30 }, (_, i) => gw.check(i, i % 3 ? alice : bob, "tight", req)),
      );
      expect(burst.every((d) => d.kind === "denied")).toBe(true);
      expect(await gw.left(alice, "tight", req)).toEqual({
        "free.global": 999,
        "free.tight": 4,
        "tight.budget": 0,
      });
      expect(await gw.left(bob, "tight", req)).toEqual({
        "free.global": 1000,
        "free.tight": 5,
        "tight.budget": 0,
      });
      if (h.slotOf) {
        const keys = gw.keys(alice, "tight", req);
        expect(h.slotOf(keys["tight.budget"]!)).not.toBe(h.slotOf(keys["free.tight"]!));
      }
    });

    it("a denial by the caller's own limit takes nothing from the route budget", async () => {
      const h = harness();
      const gw = await instances(h);
      const req = request("/v1/roomy");
      // Caller's limit 1, route budget 5 shared.
      const first = await gw.check(0, alice, "roomy", req);
      expect(remaining(first, "roomy.budget")).toBe(4);
      for (let i = 0; i < 3; i++) {
        const denied = await gw.check(i, alice, "roomy", req);
        expect(violated(denied)).toEqual(["free.roomy"]);
        if (h.atomic) expect(remaining(denied, "roomy.budget")).toBe(4);
      }
      expect((await gw.left(alice, "roomy", req))["roomy.budget"]).toBe(4);
      const other = await gw.check(1, bob, "roomy", req);
      expect(other.kind).toBe("allowed");
      expect(remaining(other, "roomy.budget")).toBe(3);
    });
  });
}
