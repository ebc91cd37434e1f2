// clients[].limits: a client's own sizes of its plan's limits. Checked with the position and the
// fix `tollgate --check` prints, and compiled once into a plan of the client's own that keeps the
// plan's name, so its limits keep their names (state keys, headers) and only their sizes change.
import { describe, expect, it } from "vitest";
import { compileRuntime, type Runtime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import type { Caller } from "../../src/identity/caller.js";
import { limitChecks } from "../../src/limits/limiter.js";
import type { TokenBucketSpec } from "../../src/limits/spec.js";

const BASE = `store: { url: memory:// }
upstreams: { api: http://127.0.0.1:3000 }
clients:
  - { id: acme, key: k1, plan: pro, tenant: acme, limits: LIMITS }
  - { id: other, key: k2, plan: pro, tenant: acme }
  - { id: slim, key: k3, plan: lean }
plans:
  pro:
    global: { rate: 5/s, burst: 10 }
    tenant: { rate: 100/s, burst: 200 }
    routes:
      search: { limit: 100, window: 1m }
      export: { limit: 100, window: 1m }
  lean:
    routes:
      search: { limit: 100, window: 1m }
routes:
  - { name: search, match: { path: /search }, upstream: api }
  - { name: export, match: { path: /export }, upstream: api, by: tenant }
  - { name: upload, match: { path: /upload }, upstream: api, cost: 8 }
  - { name: default, match: { path: / }, upstream: api }
`;

const withLimits = (limits: string) => BASE.replace("LIMITS", limits);

/** Errors and warnings in file order, as `tollgate --check` prints them (cli.ts). */
function report(yaml: string): string[] {
  const r = loadConfigText(yaml, "gw.yaml", {});
  return [...(r.ok ? [] : r.problems), ...r.warnings]
    .sort((a, b) => a.line - b.line || a.column - b.column)
    .map(formatProblem);
}

function runtime(yaml: string): Runtime {
  const r = loadConfigText(yaml, "gw.yaml", {});
  if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
  return compileRuntime(r.config, { file: "gw.yaml", version: r.version });
}

const client = (rt: Runtime, id: string) => [...rt.clientsByKeyHash.values()].find((c) => c.id === id)!;

describe("clients[].limits checks", () => {
  it("accepts overrides of the plan's global and route limits, with any algorithm", () => {
    expect(
      report(
        withLimits(
          "{ global: { algorithm: sliding_window, limit: 500, window: 1s }, routes: { search: { rate: 50/s, burst: 100 } } }",
        ),
      ),
    ).toEqual([]);
  });

  it("refuses an override of a global limit the plan does not have, at the key", () => {
    const yaml = BASE.replace(
      "plan: lean }",
      "plan: lean, limits: { global: { rate: 1/s, burst: 9 } } }",
    ).replace("LIMITS", "{}");
    expect(report(yaml)).toEqual([
      'gw.yaml:6:48: clients[2].limits: plan "lean" has no global limit to override; add global to plans.lean, or remove it here',
    ]);
  });

  it("refuses an override of a route limit the plan does not have, with the likely name", () => {
    expect(report(withLimits("{ routes: { serch: { limit: 5, window: 1m } } }"))).toEqual([
      'gw.yaml:4:71: clients[0].limits.routes: plan "pro" has no limit for route "serch" to override (did you mean "search"?); add it to plans.pro.routes, or remove it here',
    ]);
    expect(report(withLimits("{ routes: { default: { limit: 5, window: 1m } } }"))).toEqual([
      'gw.yaml:4:71: clients[0].limits.routes: plan "pro" has no limit for route "default" to override (known: search, export); add it to plans.pro.routes, or remove it here',
    ]);
  });

  it("refuses a tenant override: the tenant limit is one budget its clients share", () => {
    expect(report(withLimits("{ tenant: { rate: 50/s, burst: 100 } }"))).toEqual([
      'gw.yaml:4:61: clients[0].limits: a client cannot size its tenant\'s limit: plans.pro.tenant is one budget shared by every client of tenant "acme", and they would disagree on its size; change plans.pro.tenant, or override global to size this client alone',
    ]);
    const noTenant = withLimits("{ tenant: { rate: 50/s, burst: 100 } }").replace(
      ", tenant: acme, limits",
      ", limits",
    );
    expect(report(noTenant)).toEqual([
      "gw.yaml:4:47: clients[0].limits: this client has no tenant, so no tenant limit applies to it (nor could a client size one); remove tenant here",
    ]);
  });

  it("refuses an override of a route limit keyed by tenant or IP: shared state as well", () => {
    expect(report(withLimits("{ routes: { export: { limit: 5, window: 1m } } }"))).toEqual([
      'gw.yaml:4:71: clients[0].limits.routes: route "export" is limited by tenant: plans.pro.routes.export is one budget shared by every client of a tenant, and they would disagree on its size; change it in the plan instead',
    ]);
    const byIp = withLimits("{ routes: { export: { limit: 5, window: 1m } } }").replace(
      "by: tenant",
      "by: ip",
    );
    expect(report(byIp)[0]).toContain('route "export" is limited by ip');
  });

  it("holds an override to its algorithm's rules and to the routes' costs, at the override", () => {
    expect(report(withLimits("{ global: { limit: 50, burst: 20 } }"))).toEqual([
      "gw.yaml:4:69: clients[0].limits.global: a token bucket takes either rate + burst or limit + window, not both",
    ]);
    expect(report(withLimits("{ global: { rate: 50/s, burst: 5 } }"))).toEqual([
      'gw.yaml:4:69: clients[0].limits.global: route "upload" costs 8, more than this limit\'s 5: it could never be admitted',
    ]);
  });

  it("names an unknown key of limits with the key it meant", () => {
    expect(report(withLimits("{ glbal: { rate: 50/s, burst: 100 } }"))).toEqual([
      'gw.yaml:4:61: clients[0].limits: unknown key "glbal"; did you mean "global"?',
    ]);
  });

  it("reports an override's problems together with the rest of the file's", () => {
    const yaml = withLimits("{ routes: { serch: { limit: 5, window: 1m } } }").replace(
      "upstream: api, cost: 8",
      "upstream: apj, cost: 8",
    );
    expect(report(yaml)).toEqual([
      expect.stringContaining('clients[0].limits.routes: plan "pro" has no limit for route "serch"'),
      expect.stringContaining('routes[2].upstream: unknown upstream "apj"'),
    ]);
  });
});

describe("clients[].limits compiled", () => {
  const rt = runtime(
    withLimits(
      "{ global: { rate: 50/s, burst: 100 }, routes: { search: { algorithm: fixed_window, limit: 1000, window: 1m } } }",
    ),
  );
  const pro = rt.plans.get("pro")!;
  const acme = client(rt, "acme");

  it("gives the client a plan of its own under the plan's name; others share the plan", () => {
    expect(acme.plan).not.toBe(pro);
    expect(acme.plan.name).toBe("pro");
    expect(client(rt, "other").plan).toBe(pro);
    expect(client(rt, "slim").plan).toBe(rt.plans.get("lean"));
    expect(rt.plans.size).toBe(2);
  });

  it("keeps the plan's limit names, with the override's sizes and algorithm", () => {
    const specs = acme.plan.limitsByRoute.get("search")!.map((p) => p.spec);
    expect(specs.map((s) => s.name)).toEqual(["pro.global", "pro.tenant", "pro.search"]);
    expect((specs[0] as TokenBucketSpec).burst).toBe(100);
    expect((specs[0] as TokenBucketSpec).intervalMs).toBe(20);
    expect(specs[1]).toEqual(pro.limitsByRoute.get("search")![1]!.spec);
    expect(specs[2]).toMatchObject({ algorithm: "fixed_window", limit: 1000 });
    expect(pro.limitsByRoute.get("search")!.map((p) => p.spec.name)).toEqual(specs.map((s) => s.name));
    expect((pro.limitsByRoute.get("search")![0]!.spec as TokenBucketSpec).burst).toBe(10);
  });

  it("states the override's quota, and the plan's for the limits it leaves alone", () => {
    expect(acme.plan.limitsByRoute.get("default")!.map((p) => p.quota)).toEqual([100, 200]);
    expect(pro.limitsByRoute.get("default")!.map((p) => p.quota)).toEqual([10, 200]);
    expect(acme.plan.limits.map((p) => p.spec.name)).toEqual(pro.limits.map((p) => p.spec.name));
  });

  it("keys the client's state where it was: same keys as under the plan", () => {
    const caller: Caller = { kind: "client", id: "acme", plan: acme.plan, tenant: "acme", ipKey: "" };
    const keysOf = (plan: typeof pro) =>
      limitChecks("tg:", plan.limitsByRoute.get("search")!, caller, { name: "search", cost: 1 }).map(
        (c) => c.key,
      );
    expect(keysOf(acme.plan)).toEqual(keysOf(pro));
    expect(keysOf(acme.plan)).toEqual([
      "tg:{t:acme}:c:acme:pro.global",
      "tg:{t:acme}:pro.tenant",
      "tg:{t:acme}:c:acme:pro.search",
    ]);
  });

  it("compiles the client's plan once: every lookup gets the same lists", () => {
    expect(client(rt, "acme").plan).toBe(acme.plan);
    expect(acme.plan.limitsByRoute.get("search")).toBe(acme.plan.limitsByRoute.get("search"));
  });
});
