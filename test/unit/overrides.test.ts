// Runtime overrides without Redis or the wall clock: what a PUT body may say (the YAML's own
// per-algorithm rules, plus expires_in and reason), who may size which limit, the in-process
// table the limiter reads (same name and key, new size; nothing for callers without one; expiry
// at use), and the service keeping it current from a change feed.
import { describe, expect, it } from "vitest";
import { compileRuntime, type Runtime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import type { Caller } from "../../src/identity/caller.js";
import { Limiter, limitChecks } from "../../src/limits/limiter.js";
import type { PlannedLimit } from "../../src/limits/plan.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";
import { MemoryChangeFeed } from "../../src/operator-state/changes.js";
import {
  type OverrideRecord,
  overridable,
  overriddenLimit,
  overrideContext,
  readOverrideBody,
} from "../../src/operator-state/override-rules.js";
import { OverrideTable } from "../../src/operator-state/override-table.js";
import {
  decodeRecord,
  encodeRecord,
  MemoryOverrideStore,
  Overrides,
} from "../../src/operator-state/overrides.js";

const YAML = `store: { url: memory:// }
upstreams: { api: http://127.0.0.1:3000 }
clients:
  - { id: acme, key: k1, plan: pro, tenant: acme }
  - { id: other, key: k2, plan: pro, tenant: globex }
  - { id: lean, key: k3, plan: lean }
plans:
  pro:
    global: { rate: 1/m, burst: 5 }
    tenant: { algorithm: fixed_window, limit: 100, window: 1h }
    routes:
      search: { algorithm: sliding_window, limit: 10, window: 1m }
      quiet: { rate: 1/s, burst: 10, shadow: true }
  lean:
    global: { rate: 1/s, burst: 3 }
routes:
  - { name: search, match: { path: /search }, upstream: api, limits: { total: { limit: 1000, window: 1h } } }
  - { name: quiet, match: { path: /quiet }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

function runtime(yaml = YAML): Runtime {
  const r = loadConfigText(yaml, "gw.yaml", {});
  if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
  return compileRuntime(r.config, { file: "gw.yaml", version: r.version });
}

const rt = runtime();
const ctx = overrideContext(rt);
const plan = (name: string) => rt.plans.get(name)!;
const limit = (name: string): PlannedLimit => {
  for (const p of rt.plans.values()) for (const l of p.limits) if (l.spec.name === name) return l;
  for (const r of rt.routeList) for (const l of r.limits) if (l.spec.name === name) return l;
  throw new Error(`no limit ${name}`);
};
const client = (id: string, tenant?: string, planName = "pro"): Caller => ({
  kind: "client",
  id,
  plan: plan(planName),
  tenant,
  ipKey: "10.0.0.1",
});
const T0 = 1_700_000_000_000;

/** The problems of a body for `name`, or the record it makes. */
function read(name: string, body: unknown, costs: Record<string, number> = {}) {
  return readOverrideBody(limit(name), body, T0, ctx, new Map(Object.entries(costs)));
}
const problems = (name: string, body: unknown, costs?: Record<string, number>) => {
  const r = read(name, body, costs);
  return "problems" in r ? r.problems : [];
};
const base = { expires_in: "2h", reason: "launch week" };

describe("an override's body: the limit's own keys, checked as the YAML checks them", () => {
  it("a token bucket's new burst and rate make a record and the limit at its new size", () => {
    const r = read("pro.global", { burst: 20, rate: "10/s", ...base });
    expect("problems" in r ? r.problems : []).toEqual([]);
    if ("problems" in r) return;
    expect(r.record).toEqual({
      algorithm: "token_bucket",
      sizes: { burst: 20, rate: "10/s" },
      reason: "launch week",
      expiresAtMs: T0 + 7_200_000,
      setAtMs: T0,
    });
    expect(r.limit.spec).toMatchObject({
      name: "pro.global",
      algorithm: "token_bucket",
      burst: 20,
      intervalMs: 100,
    });
    expect(r.limit.quota).toBe(20);
    // Keyed as the plan keys it: the same state, only the size differs.
    expect(r.limit.by).toBe(limit("pro.global").by);
  });

  it("takes any form the algorithm takes (a token bucket as limit + window), a window's calendar period", () => {
    expect(problems("pro.global", { limit: 100, window: "1h", ...base })).toEqual([]);
    expect(problems("pro.tenant", { limit: 100000, window: "1 month", ...base })).toEqual([]);
  });

  it("takes only the keys that change: the rest stay as the config writes them", () => {
    const r = read("pro.global", { burst: 100, ...base });
    expect("problems" in r ? r.problems : []).toEqual([]);
    if ("problems" in r) return;
    // The record keeps the patch only, so a reload that changes the rate changes this limit too.
    expect(r.record.sizes).toEqual({ burst: 100 });
    expect(r.limit.spec).toMatchObject({ burst: 100, intervalMs: 60_000 });
    const window = read("pro.search", { limit: 50, ...base });
    expect("limit" in window && window.limit.spec).toMatchObject({ limit: 50, windowMs: 60_000 });
  });

  it("a patch in the other form of a token bucket replaces the configured form whole", () => {
    const r = read("pro.global", { limit: 600, window: "1h", ...base });
    expect("limit" in r && r.limit.spec).toMatchObject({ burst: 600, intervalMs: 6000 });
  });

  it("an override of a burst alone follows the config's rate through a reload", () => {
    const record: OverrideRecord = {
      algorithm: "token_bucket",
      sizes: { burst: 100 },
      reason: "launch",
      expiresAtMs: T0 + 3_600_000,
      setAtMs: T0,
    };
    const reloaded = runtime(
      YAML.replace("global: { rate: 1/m, burst: 5 }", "global: { rate: 2/s, burst: 5 }"),
    );
    const globalOf = (r: Runtime) => r.plans.get("pro")!.limits.find((l) => l.spec.name === "pro.global")!;
    const before = overriddenLimit(limit("pro.global"), record, ctx);
    const after = overriddenLimit(globalOf(reloaded), record, overrideContext(reloaded));
    expect("spec" in before && before.spec).toMatchObject({ burst: 100, intervalMs: 60_000 });
    expect("spec" in after && after.spec).toMatchObject({ burst: 100, intervalMs: 500 });
  });

  it("keeps a shadow limit a shadow", () => {
    const r = read("pro.quiet", { rate: "2/s", burst: 30, ...base });
    expect("limit" in r && r.limit.spec.shadow).toBe(true);
  });

  it.each([
    [
      "a key of another algorithm",
      "pro.global",
      { burst: 20, rate: "1/s", queue: 3 },
      "queue does not apply to pro.global, a token bucket: it takes `rate` + `burst` or `limit` + `window`",
    ],
    [
      "a bucket's burst on a sliding window",
      "pro.search",
      { limit: 20, window: "1m", burst: 3 },
      "burst does not apply to pro.search, sliding_window (it takes limit + window): it takes `limit` + `window`",
    ],
    [
      "a misspelt key",
      "pro.global",
      { brust: 20, rate: "1/s" },
      'unknown key "brust"; did you mean "burst"?',
    ],
    ["half of the other form", "pro.global", { limit: 20 }, "window is missing"],
    [
      "both forms",
      "pro.global",
      { burst: 20, rate: "1/s", limit: 5, window: "1m" },
      "a token bucket takes either rate + burst or limit + window, not both",
    ],
    [
      "no size",
      "pro.global",
      {},
      'give the new size of pro.global: any of `rate` + `burst` or `limit` + `window`, the rest staying as configured, e.g. { "burst": 20, "rate": "10/s", "expires_in": "2h", "reason": "launch week" }',
    ],
    ["a bad rate", "pro.global", { burst: 20, rate: "fast" }, "rate: "],
    [
      "a by",
      "pro.global",
      { burst: 20, rate: "1/s", by: "ip" },
      "how it is keyed stays the config's: remove by",
    ],
    ["a shadow", "pro.global", { burst: 20, rate: "1/s", shadow: true }, "remove shadow"],
    ["unlimited", "pro.global", { unlimited: true }, "cannot lift it"],
    [
      "another algorithm",
      "pro.global",
      { algorithm: "fixed_window", limit: 5, window: "1m" },
      "an override keeps its algorithm",
    ],
    [
      "limit: 0 on a token bucket",
      "pro.global",
      { limit: 0 },
      "limit: 0 would make pro.global a fixed window that denies everything, but it is a token bucket",
    ],
  ])("refuses %s, naming the fix", (_what, name, size, fix) => {
    expect(problems(name, { ...size, ...base }).join("\n")).toContain(fix);
  });

  it("keeps the algorithm key when it names the limit's own algorithm", () => {
    expect(problems("pro.global", { algorithm: "token_bucket", burst: 20, rate: "1/s", ...base })).toEqual(
      [],
    );
  });

  it("requires expires_in (1s to 30d) and a one-line reason", () => {
    const size = { burst: 20, rate: "1/s" };
    expect(problems("pro.global", { ...size, reason: "x" })).toEqual([
      'expires_in is required: how long the override lasts (1s to 30d), e.g. "2h"; it ends by itself',
    ]);
    expect(problems("pro.global", { ...size, reason: "x", expires_in: "soon" })[0]).toBe(
      'expires_in: "soon" is not a duration: write one such as "90s", "2h" or "7d"',
    );
    expect(problems("pro.global", { ...size, reason: "x", expires_in: 60 })[0]).toContain(
      "is not a duration",
    );
    expect(problems("pro.global", { ...size, reason: "x", expires_in: "31d" })[0]).toContain(
      "is longer than 30d, the most an override lasts",
    );
    expect(problems("pro.global", { ...size, reason: "x", expires_in: "500ms" })[0]).toContain(
      "is shorter than 1s",
    );
    expect(problems("pro.global", { ...size, expires_in: "1h" })[0]).toContain("reason is required");
    expect(problems("pro.global", { ...size, expires_in: "1h", reason: "  " })[0]).toContain("non-empty");
    expect(problems("pro.global", { ...size, expires_in: "1h", reason: "a\nb" })[0]).toContain("control");
    expect(problems("pro.global", { ...size, expires_in: "1h", reason: "x".repeat(501) })[0]).toContain(
      "500",
    );
  });

  it("refuses a size a route the limit binds could never fit in, as the YAML does", () => {
    expect(problems("pro.global", { burst: 5, rate: "1/s", ...base }, { upload: 8, search: 1 })).toEqual([
      'route "upload" costs 8, more than this size\'s 5: its requests could never be admitted; give at least 8',
    ]);
  });

  it("says what to send for a body that is not an object", () => {
    expect(problems("pro.global", [1, 2])[0]).toContain("send a JSON object");
  });
});

describe("who may size which limit", () => {
  const may = (kind: "client" | "tenant", id: string, name: string) =>
    overridable(rt, { kind, id }, limit(name));

  it("a client sizes the limits keyed by the caller; a tenant those keyed by the tenant alone", () => {
    expect(may("client", "acme", "pro.global")).toEqual({ ok: true });
    expect(may("client", "acme", "pro.search")).toEqual({ ok: true });
    expect(may("tenant", "acme", "pro.tenant")).toEqual({ ok: true });
  });

  it("refuses what other callers share, saying whom to override instead", () => {
    expect(may("client", "acme", "pro.tenant")).toEqual({
      ok: false,
      detail:
        "pro.tenant is keyed by tenant: one budget shared by every client of a tenant, and they would disagree on its size; override it for the tenant: PUT /admin/overrides/tenant:<tenant>/pro.tenant",
    });
    expect(may("tenant", "acme", "pro.global")).toMatchObject({
      ok: false,
      detail: expect.stringContaining("override it per client"),
    });
    expect(may("client", "acme", "search.total")).toMatchObject({
      ok: false,
      detail: expect.stringContaining("search.total is keyed by route, with no caller or tenant part"),
    });
  });

  it("a client of the config only on its own plan's limits; a client it does not know on any", () => {
    expect(may("client", "lean", "pro.global")).toEqual({
      ok: false,
      detail:
        "client lean is on plan lean, whose requests pro.global never limits; its limits a client override may size: lean.global",
    });
    expect(may("client", "issued-at-runtime", "pro.global")).toEqual({ ok: true });
  });
});

describe("the in-process table the limiter reads", () => {
  const record = (
    sizes: Record<string, unknown>,
    expiresAtMs: number,
    algorithm = "token_bucket",
  ): OverrideRecord => ({
    algorithm: algorithm as OverrideRecord["algorithm"],
    sizes,
    reason: "test",
    expiresAtMs,
    setAtMs: T0,
  });
  const setup = () => {
    let now = T0;
    const table = new OverrideTable({ now: () => now });
    return { table, advance: (ms: number) => (now += ms) };
  };
  const searchList = plan("pro").limitsByRoute.get("search")!;

  it("gives a caller without an override its compiled list itself, and so every caller while there is none", () => {
    const { table } = setup();
    expect(table.apply(client("acme", "acme"), searchList, ctx)).toBe(searchList);
    table.setCaller(
      "client:other",
      new Map([["pro.global", record({ burst: 20, rate: "1/m" }, T0 + 60_000)]]),
    );
    expect(table.apply(client("acme", "acme"), searchList, ctx)).toBe(searchList);
    const anonymous: Caller = { kind: "anonymous", plan: undefined, ipKey: "10.0.0.1" };
    expect(table.apply(anonymous, searchList, ctx)).toBe(searchList);
  });

  it("replaces the overridden limit in place: same name and key, the new size, the rest untouched", () => {
    const { table } = setup();
    table.setCaller(
      "client:acme",
      new Map([["pro.global", record({ burst: 20, rate: "1/m" }, T0 + 60_000)]]),
    );
    const caller = client("acme", "acme");
    const list = table.apply(caller, searchList, ctx);
    expect(list).not.toBe(searchList);
    expect(list.map((l) => l.spec.name)).toEqual(searchList.map((l) => l.spec.name));
    const i = searchList.findIndex((l) => l.spec.name === "pro.global");
    expect(list[i]!.quota).toBe(20);
    expect(list[i]!.description).toBe('"pro.global" allows 20 requests, refilled over 20m');
    expect(list.filter((_, j) => j !== i)).toEqual(searchList.filter((_, j) => j !== i));
    const route = rt.routeList.find((r) => r.name === "search")!;
    expect(limitChecks("t:", list, caller, route).map((c) => c.key)).toEqual(
      limitChecks("t:", searchList, caller, route).map((c) => c.key),
    );
    // Built once, then the same list for every request until something changes.
    expect(table.apply(caller, searchList, ctx)).toBe(list);
  });

  it("ends an override at its expiry with no message, and not a millisecond before", () => {
    const { table, advance } = setup();
    table.setCaller("client:acme", new Map([["pro.global", record({ burst: 20, rate: "1/m" }, T0 + 1000)]]));
    const caller = client("acme", "acme");
    advance(999);
    expect(table.apply(caller, searchList, ctx)).not.toBe(searchList);
    expect(table.get("client:acme", "pro.global")).toBeDefined();
    advance(1);
    expect(table.apply(caller, searchList, ctx)).toBe(searchList);
    expect(table.get("client:acme", "pro.global")).toBeUndefined();
    expect(table.size).toBe(0);
  });

  it("applies a tenant's override to that tenant's clients only, on its tenant-keyed limits only", () => {
    const { table } = setup();
    table.setCaller(
      "tenant:acme",
      new Map([["pro.tenant", record({ limit: 7, window: "1h" }, T0 + 60_000, "fixed_window")]]),
    );
    const sized = (c: Caller) =>
      table.apply(c, searchList, ctx).find((l) => l.spec.name === "pro.tenant")!.quota;
    expect(sized(client("acme", "acme"))).toBe(7);
    expect(sized(client("someone-else", "acme"))).toBe(7);
    expect(sized(client("other", "globex"))).toBe(100);
    // A client override of the tenant's limit is never applied (the rules refuse it anyway).
    table.setCaller(
      "client:other",
      new Map([["pro.tenant", record({ limit: 7, window: "1h" }, T0 + 60_000, "fixed_window")]]),
    );
    expect(sized(client("other", "globex"))).toBe(100);
  });

  it("leaves out an override its limit's algorithm no longer matches (a reload changed it)", () => {
    const { table } = setup();
    table.setCaller(
      "client:acme",
      new Map([["pro.global", record({ limit: 9, window: "1m" }, T0 + 60_000, "fixed_window")]]),
    );
    expect(table.apply(client("acme", "acme"), searchList, ctx)).toBe(searchList);
  });

  it("replaces what it holds for a caller, or everything; and is bounded", () => {
    const { table } = setup();
    table.setCaller(
      "client:acme",
      new Map([["pro.global", record({ burst: 20, rate: "1/m" }, T0 + 60_000)]]),
    );
    table.setCaller("client:acme", new Map());
    expect(table.size).toBe(0);
    table.replaceAll(
      new Map([["client:a", new Map([["pro.global", record({ burst: 2, rate: "1/m" }, T0 + 1)]])]]),
    );
    expect(table.get("client:a", "pro.global")?.sizes).toEqual({ burst: 2, rate: "1/m" });
    const small = new OverrideTable({ now: () => T0, max: 1 });
    small.setCaller("client:a", new Map([["pro.global", record({ burst: 2, rate: "1/m" }, T0 + 1)]]));
    expect(small.hasRoomFor("client:b", "pro.global")).toBe(false);
    expect(small.hasRoomFor("client:a", "pro.global")).toBe(true);
  });

  it("shows the admin API what applies, with its record", () => {
    const { table } = setup();
    table.setCaller(
      "client:acme",
      new Map([["pro.global", record({ burst: 20, rate: "1/m" }, T0 + 60_000)]]),
    );
    const shown = table.effective({ client: "acme", tenant: "acme" }, limit("pro.global"), ctx);
    expect(shown?.limit.quota).toBe(20);
    expect(shown?.record.reason).toBe("test");
    expect(table.effective({ client: undefined, tenant: "acme" }, limit("pro.global"), ctx)).toBeUndefined();
  });
});

describe("the limiter with an override", () => {
  it("admits exactly the overridden burst, and states it in the decision", async () => {
    const now = T0;
    const table = new OverrideTable({ now: () => now });
    const limiter = new Limiter({
      store: new MemoryStore({ sweepIntervalMs: 0, now: () => now }),
      prefix: "t:",
      now: () => now,
      overrides: table.forRuntime(ctx),
    });
    const caller = client("acme", "acme");
    const route = rt.routeList.find((r) => r.name === "default")!;
    table.setCaller(
      "client:acme",
      new Map([
        [
          "pro.global",
          {
            algorithm: "token_bucket",
            sizes: { burst: 20, rate: "1/m" },
            reason: "r",
            expiresAtMs: T0 + 60_000,
            setAtMs: T0,
          },
        ],
      ]),
    );
    const decisions = [];
    for (let i = 0; i < 25; i++) decisions.push(await limiter.check(caller, route));
    expect(decisions.filter((d) => d.kind === "allowed")).toHaveLength(20);
    const denied = decisions.find((d) => d.kind === "denied")!;
    expect(denied.kind === "denied" && denied.violated[0]!.limit.quota).toBe(20);
    // Another client of the plan keeps the plan's 5.
    const others = [];
    for (let i = 0; i < 8; i++) others.push(await limiter.check(client("other", "globex"), route));
    expect(others.filter((d) => d.kind === "allowed")).toHaveLength(5);
  });
});

describe("the overrides service", () => {
  const rec = (burst: number, expiresAtMs = T0 + 60_000): OverrideRecord => ({
    algorithm: "token_bucket",
    sizes: { burst, rate: "1/m" },
    reason: "r",
    expiresAtMs,
    setAtMs: T0,
  });

  it("a write is in this instance's table when it resolves, and in another's when the feed says so", async () => {
    const feed = new MemoryChangeFeed();
    const store = new MemoryOverrideStore(feed, { now: () => T0 });
    // Two services over one store and one feed: two instances sharing a Redis, in miniature.
    const one = new Overrides({ store, feed, now: () => T0 });
    const two = new Overrides({ store, feed, now: () => T0 });
    expect(await one.set("client:acme", "pro.global", rec(20))).toBe(false);
    expect(one.table.get("client:acme", "pro.global")?.sizes).toEqual({ burst: 20, rate: "1/m" });
    await new Promise((r) => setImmediate(r));
    expect(two.table.get("client:acme", "pro.global")?.sizes).toEqual({ burst: 20, rate: "1/m" });
    expect(await two.set("client:acme", "pro.global", rec(30))).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(one.table.get("client:acme", "pro.global")?.sizes).toEqual({ burst: 30, rate: "1/m" });
    expect(await one.remove("client:acme", "pro.global")).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(two.table.size).toBe(0);
    expect(await one.remove("client:acme", "pro.global")).toBe(false);
  });

  it("loads everything at start, and again when the feed says changes may have been missed", async () => {
    const feed = new MemoryChangeFeed();
    const store = new MemoryOverrideStore(feed, { now: () => T0 });
    await store.write("client:a", "pro.global", rec(20));
    await store.write("tenant:t", "pro.tenant", rec(7));
    const svc = new Overrides({ store, feed, now: () => T0 });
    await svc.load();
    expect(svc.table.size).toBe(2);
    // Written behind the feed's back (as a Redis restarted empty would lose everything).
    await new MemoryOverrideStore(new MemoryChangeFeed()).write("client:b", "pro.global", rec(1));
    await store.write("client:a", "pro.global", undefined);
    const resets: (() => void)[] = [];
    const quiet = { onChange: () => {}, onReset: (l: () => void) => resets.push(l) };
    const svc2 = new Overrides({ store, feed: quiet, now: () => T0 });
    svc2.table.setCaller("client:ghost", new Map([["pro.global", rec(3)]]));
    expect(resets).toHaveLength(1);
    for (const reset of resets) reset();
    await new Promise((r) => setImmediate(r));
    expect(svc2.table.get("client:ghost", "pro.global")).toBeUndefined();
    expect(svc2.table.get("tenant:t", "pro.tenant")?.sizes).toEqual({ burst: 7, rate: "1/m" });
  });

  it("keeps what it had when the store fails, and reports it", async () => {
    const errors: Error[] = [];
    const failing = {
      write: () => Promise.reject(new Error("down")),
      read: () => Promise.reject(new Error("down")),
      readAll: () => Promise.reject(new Error("down")),
    };
    const svc = new Overrides({
      store: failing,
      feed: new MemoryChangeFeed(),
      now: () => T0,
      onError: (e) => errors.push(e),
      retryMs: 60_000,
    });
    svc.table.setCaller("client:a", new Map([["pro.global", rec(20)]]));
    await svc.refresh("client:a");
    await svc.load();
    svc.stop();
    expect(svc.table.size).toBe(1);
    expect(errors.map((e) => e.message)).toEqual(["down", "down"]);
    await expect(svc.set("client:a", "pro.global", rec(1))).rejects.toThrow("down");
  });
});

describe("a stored record", () => {
  it("round-trips, and what this version cannot read is dropped, never trusted", () => {
    const r: OverrideRecord = {
      algorithm: "fixed_window",
      sizes: { limit: 5, window: "1h" },
      reason: "x",
      expiresAtMs: 2,
      setAtMs: 1,
    };
    expect(decodeRecord(encodeRecord(r))).toEqual(r);
    expect(JSON.parse(encodeRecord(r))).toMatchObject({ expires_at: 2, set_at: 1 });
    for (const bad of [
      "",
      "{",
      "null",
      "[]",
      '{"algorithm":"nope","sizes":{},"reason":"","expires_at":1,"set_at":1}',
      '{"algorithm":"token_bucket","sizes":[],"reason":"","expires_at":1,"set_at":1}',
      '{"algorithm":"token_bucket","sizes":{},"reason":"","expires_at":"1","set_at":1}',
    ])
      expect(decodeRecord(bad)).toBeUndefined();
  });
});
