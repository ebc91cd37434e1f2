// routes[].limits and `by:` compiled into what the limiter decides with: the route's limits after
// the plan's, for every caller (one without a plan too), each under the key its `by` says, and one
// store decision for all of them (the memory store here; the conformance suite runs Redis).
import { describe, expect, it } from "vitest";
import { compileRuntime, type Runtime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import type { Caller } from "../../src/identity/caller.js";
import type { LimitDecision } from "../../src/limits/decision.js";
import type { KeyedRequest } from "../../src/limits/key-by.js";
import { Limiter } from "../../src/limits/limiter.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";

const YAML = `store: { url: memory:// }
upstreams: { api: http://127.0.0.1:3000 }
clients:
  - { id: big, key: k1, plan: free, limits: { routes: { models: { limit: 5, window: 1m } } } }
  - { id: small, key: k2, plan: free }
plans:
  free:
    global: { limit: 100, window: 1m }
    routes:
      reports: { limit: 2, window: 1m, by: "segment:3" }
      models: { limit: 1, window: 1m, by: [caller, "header:x-model"] }
routes:
  - name: search
    match: { path: /v1/search }
    upstream: api
    limits:
      total: { limit: 3, window: 1m }
      per-org: { limit: 2, window: 1m, by: "header:x-org-id" }
  - { name: reports, match: { path: /v1/reports }, upstream: api }
  - { name: models, match: { path: /v1/models }, upstream: api }
`;

function runtime(yaml: string): Runtime {
  const r = loadConfigText(yaml, "gw.yaml", {});
  if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
  return compileRuntime(r.config, { file: "gw.yaml", version: r.version });
}

const rt = runtime(YAML);
const plan = (id: string) => [...rt.clientsByKeyHash.values()].find((c) => c.id === id)!.plan;
const big: Caller = { kind: "client", id: "big", plan: plan("big"), tenant: undefined, ipKey: "192.0.2.1" };
const small: Caller = {
  kind: "client",
  id: "small",
  plan: plan("small"),
  tenant: undefined,
  ipKey: "192.0.2.2",
};
const stranger: Caller = { kind: "anonymous", plan: undefined, ipKey: "192.0.2.3" };
const route = (name: string) => rt.routeList.find((r) => r.name === name)!;
const req = (path: string, headers: Record<string, string> = {}): KeyedRequest => ({
  headers,
  path,
  query: "",
});

function limiter(): Limiter {
  return new Limiter({
    store: new MemoryStore({ sweepIntervalMs: 0, now: () => 1_700_000_000_000 }),
    prefix: "t:",
  });
}

const kinds = async (l: Limiter, runs: [Caller, string, KeyedRequest][]): Promise<string[]> => {
  const out: string[] = [];
  for (const [caller, name, request] of runs) out.push((await l.check(caller, route(name), request)).kind);
  return out;
};

describe("route limits", () => {
  it("follow the plan's limits, named <route>.<name>, keyed by route unless by says", () => {
    expect(small.plan.limitsByRoute.get("search")!.map((p) => [p.spec.name, p.by.text])).toEqual([
      ["free.global", "caller"],
      ["search.total", "route"],
      ["search.per-org", "header:x-org-id"],
    ]);
    expect(route("search").limits.map((p) => p.spec.name)).toEqual(["search.total", "search.per-org"]);
    expect(route("search").keyedHeaders).toEqual(["x-org-id"]);
    expect(route("models").keyedHeaders).toEqual(["x-model"]);
    expect(route("reports").keyedHeaders).toEqual([]);
  });

  it("one budget for every caller, one without a plan included", async () => {
    const l = limiter();
    const r = req("/v1/search");
    expect(
      await kinds(l, [
        [big, "search", r],
        [stranger, "search", r],
        [small, "search", r],
        [stranger, "search", r],
      ]),
    ).toEqual(["allowed", "allowed", "allowed", "denied"]);
  });

  it("a denial by the route budget takes nothing from the caller's own limits, and says what it is", async () => {
    const l = limiter();
    for (let i = 0; i < 3; i++)
      await l.check(big, route("search"), req("/v1/search", { "x-org-id": `o${i}` }));
    const denied = (await l.check(
      small,
      route("search"),
      req("/v1/search", { "x-org-id": "o9" }),
    )) as Extract<LimitDecision, { kind: "denied" }>;
    expect(denied.kind).toBe("denied");
    expect(denied.violated.map((v) => v.limit.description)).toEqual([
      '"search.total" allows 3 requests, refilled over 1m, shared by every caller of the route',
    ]);
    // small's global budget and o9's per-org budget were not touched by the denied request.
    const after = await l.check(small, route("reports"), req("/v1/reports/r1"));
    expect(after.kind === "allowed" && after.applied[0]!.outcome.remaining).toBe(99);
  });

  it("keys per value: per org, per path segment, per (caller, model)", async () => {
    const l = limiter();
    const org = (o: string) => req("/v1/search", { "x-org-id": o });
    // per-org 2, total 3: the third request of org a is refused by per-org, whoever sends it.
    expect(
      await kinds(l, [
        [small, "search", org("a")],
        [big, "search", org("a")],
        [small, "search", org("a")],
      ]),
    ).toEqual(["allowed", "allowed", "denied"]);

    const reports = limiter();
    expect(
      await kinds(reports, [
        [small, "reports", req("/v1/reports/r1")],
        [small, "reports", req("/v1/reports/r1")],
        [small, "reports", req("/v1/reports/r1")],
        [small, "reports", req("/v1/reports/r2")],
      ]),
    ).toEqual(["allowed", "allowed", "denied", "allowed"]);

    const models = limiter();
    const m = (x: string) => req("/v1/models", { "x-model": x });
    expect(
      await kinds(models, [
        [small, "models", m("gpt-4")],
        [small, "models", m("gpt-4")],
        [small, "models", m("mini")],
        [big, "models", m("gpt-4")],
      ]),
    ).toEqual(["allowed", "denied", "allowed", "allowed"]);
  });

  it("a missing value keys by the caller: leaving the header out neither escapes nor shares", async () => {
    const l = limiter();
    const none = req("/v1/models");
    expect(
      await kinds(l, [
        [small, "models", none],
        [small, "models", none],
        [big, "models", none],
      ]),
    ).toEqual(["allowed", "denied", "allowed"]);
  });

  it("a client's override keeps the plan's by and name, with its own size", async () => {
    const modelsLimit = big.plan.limitsByRoute.get("models")!.at(-1)!;
    expect(modelsLimit.spec.name).toBe("free.models");
    expect(modelsLimit.by.text).toBe("[caller, header:x-model]");
    expect(modelsLimit.quota).toBe(5);
    const l = limiter();
    const m = req("/v1/models", { "x-model": "gpt-4" });
    const runs: [Caller, string, KeyedRequest][] = Array.from({ length: 6 }, () => [big, "models", m]);
    expect(await kinds(l, runs)).toEqual(["allowed", "allowed", "allowed", "allowed", "allowed", "denied"]);
    expect(
      await kinds(l, [
        [small, "models", m],
        [small, "models", m],
      ]),
    ).toEqual(["allowed", "denied"]);
  });
});
