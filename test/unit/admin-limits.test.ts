// The admin API on keyed limits and route budgets: GET/DELETE /admin/limits/{name}?key=… and what
// GET /admin/callers/… shows beyond a caller's own limits. Requests are decided by a real Limiter
// on a memory store at a fixed time, then the endpoints are asked as the router asks them: each
// answer must name the key the limiter wrote and the state it left there.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { keyedPrefix } from "../../src/admin/caller-limits.js";
import { callerEndpoints, KEYED_LISTING } from "../../src/admin/endpoints/callers.js";
import { limitEndpoints } from "../../src/admin/endpoints/limits.js";
import type { AdminHandler } from "../../src/admin/router.js";
import { createAdminHandler } from "../../src/admin/server.js";
import { fromStoreDescribedBy } from "../../src/admin/store-failure.js";
import type { CompiledRoute } from "../../src/config/compile.js";
import { PROBLEMS } from "../../src/http/problem.js";
import type { Caller } from "../../src/identity/caller.js";
import type { KeyedRequest } from "../../src/limits/key-by.js";
import { Limiter, limitChecks } from "../../src/limits/limiter.js";
import type { Inspector, Store } from "../../src/limits/stores/contract.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";
import { Metrics } from "../../src/observability/metrics.js";
import type { AuditWrite } from "../../src/operator-state/audit.js";
import { expectProblem } from "./support/problems.js";
import { fakeRequest, fakeResponse, NOW, runtimeOf } from "./support/proxy-fakes.js";

const TOKEN = "s3cret-admin-token-0123456789";
const rt = runtimeOf(`
store: { url: "memory://", prefix: "tg:" }
upstreams: { api: "http://127.0.0.1:1" }
admin: { token: "${TOKEN}" }
identity: { jwt: { secret: "0123456789abcdef0123456789abcdef", default_plan: free } }
clients:
  - { id: bob, key: bob-key, plan: free, tenant: acme }
  - { id: ann, key: ann-key, plan: free }
  - { id: big, key: big-key, plan: pro, limits: { global: { rate: 1/s, burst: 50 } } }
plans:
  anonymous: { global: { rate: 1/s, burst: 3 } }
  free:
    global: { rate: 1/s, burst: 10 }
    routes:
      reports: { limit: 10, window: 1m, by: "segment:3" }
      models: { limit: 100, window: 1h, by: [caller, "header:x-model"] }
      search: { limit: 30, window: 1m, by: [ip, "query:q"] }
  pro:
    global: { rate: 1/s, burst: 20 }
routes:
  - name: search
    match: { path: /v1/search }
    upstream: api
    limits:
      total: { rate: 500/s, burst: 1000 }
      per-org: { rate: 50/s, burst: 100, by: "header:x-org-id" }
      per-org-claim: { limit: 5, window: 1m, by: "claim:org" }
  - name: models
    match: { path: /v1/models }
    upstream: api
    limits:
      per-team: { limit: 40, window: 1m, by: [tenant, "query:team"] }
  - { name: reports, match: { path: /v1/reports }, upstream: api }
`);

const route = (name: string): CompiledRoute => rt.routeList.find((r) => r.name === name)!;
const clientPlan = (id: string) => [...rt.clientsByKeyHash.values()].find((c) => c.id === id)!.plan;
const bob: Caller = {
  kind: "client",
  id: "bob",
  plan: clientPlan("bob"),
  tenant: "acme",
  ipKey: "192.0.2.9",
};
const big: Caller = {
  kind: "client",
  id: "big",
  plan: clientPlan("big"),
  tenant: undefined,
  ipKey: "192.0.2.8",
};
const dan: Caller = {
  kind: "client",
  id: "jwt:dan",
  plan: rt.plans.get("free")!,
  tenant: undefined,
  ipKey: "192.0.2.5",
  claims: { org: "o-1" },
};
const anonymous: Caller = { kind: "anonymous", plan: rt.anonymousPlan, ipKey: "2001:db8::/64" };

function request(path: string, headers: Record<string, string> = {}, query = ""): KeyedRequest {
  return { headers, path, query };
}

/** A memory store at a fixed time, a limiter deciding on it, and both endpoints reading it. */
function setup(store: Store = new MemoryStore({ sweepIntervalMs: 0, now: () => NOW })) {
  const limiter = new Limiter({ store, prefix: "tg:", now: () => NOW });
  const asked: string[] = [];
  const live = {
    flushDenials: async () => {},
    forgetDenials: (keys: Iterable<string>) => {
      asked.push(`forget ${[...keys].join(" ")}`);
    },
  };
  const deps = {
    runtime: () => rt,
    store: () => store,
    limiter: () => live,
    fromStore: fromStoreDescribedBy((err) => String(err)),
    // An entry joins what was asked, so a test sees it written after the reset.
    audit: {
      write: async (e: AuditWrite) => {
        asked.push(`audit ${e.token} ${e.action} ${e.target}`);
      },
    },
  };
  const send = async (caller: Caller, routeName: string, req: KeyedRequest, times = 1) => {
    for (let i = 0; i < times; i++) {
      const decision = await limiter.check(caller, route(routeName), req);
      if (decision.kind !== "allowed") throw new Error(`request ${i} was ${decision.kind}`);
    }
  };
  return { store, asked, send, limits: limitEndpoints(deps), callers: callerEndpoints(deps) };
}

async function call(handler: AdminHandler, params: Record<string, string>, query = "", method = "GET") {
  const res = fakeResponse();
  const principal = { name: "ops", scope: "write" } as const;
  await handler({ req: fakeRequest({ method }), res, params, query: new URLSearchParams(query), principal });
  return res;
}

/** The key the limiter writes for this caller, route and request, for the limit named. */
function limiterKey(caller: Caller, routeName: string, req: KeyedRequest | undefined, name: string): string {
  const planned = caller.plan?.limitsByRoute.get(routeName) ?? route(routeName).limits;
  const checks = limitChecks("tg:", planned, caller, route(routeName), req);
  return checks.find((c) => c.spec.name === name)!.key;
}

describe("GET /admin/limits/{name}?key=…", () => {
  it("a route budget needs no key: one state, whoever called", async () => {
    const { send, limits } = setup();
    await send(bob, "search", request("/v1/search"), 2);
    await send(anonymous, "search", request("/v1/search"));
    const res = await call(limits.show, { name: "search.total" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["cache-control"]).toBe("no-store");
    expect(res.json()).toEqual({
      name: "search.total",
      by: "route",
      routes: ["search"],
      values: { route: "search" },
      window_seconds: 2,
      algorithm: "token_bucket",
      limit: 1000,
      remaining: 997,
      reset_seconds: 1,
      shadow: false,
      key: limiterKey(bob, "search", undefined, "search.total"),
    });
    // The route may be named, and only one the limit binds.
    expect((await call(limits.show, { name: "search.total" }, "key=search")).json()).toMatchObject({
      remaining: 997,
    });
    expectProblem(
      await call(limits.show, { name: "search.total" }, "key=reports"),
      "bad_limit",
      'search.total binds no route "reports": search.total is kept per route: give no key; its routes: search',
    );
  });

  it("a header value, and a caller's requests that lacked the header", async () => {
    const { send, limits } = setup();
    await send(bob, "search", request("/v1/search", { "x-org-id": "acme" }), 2);
    await send(bob, "search", request("/v1/search"));
    await send(anonymous, "search", request("/v1/search"), 3);
    const acme = (await call(limits.show, { name: "search.per-org" }, "key=acme")).json();
    expect(acme).toMatchObject({
      by: "header:x-org-id",
      values: { "header:x-org-id": "acme" },
      remaining: 98,
      key: limiterKey(bob, "search", request("/v1/search", { "x-org-id": "acme" }), "search.per-org"),
    });
    // The route is no part of this key: only the header's value is.
    expect(acme.values).toEqual({ "header:x-org-id": "acme" });
    const lacking = (await call(limits.show, { name: "search.per-org" }, "key=@client:bob")).json();
    expect(lacking).toMatchObject({
      values: { "header:x-org-id": "@client:bob" },
      remaining: 99,
      key: limiterKey(bob, "search", request("/v1/search"), "search.per-org"),
    });
    // An anonymous caller's address is grouped as the limiter groups it (ipv6_prefix 64).
    const ip = (await call(limits.show, { name: "search.per-org" }, "key=@ip:2001:db8::77")).json();
    expect(ip).toMatchObject({
      remaining: 97,
      key: limiterKey(anonymous, "search", request("/v1/search"), "search.per-org"),
    });
  });

  it("a value that starts with @ is written @@", async () => {
    const { send, limits } = setup();
    await send(ann(), "search", request("/v1/search", { "x-org-id": "@client:bob" }));
    const res = (await call(limits.show, { name: "search.per-org" }, "key=@@client:bob")).json();
    expect(res).toMatchObject({ values: { "header:x-org-id": "@client:bob" }, remaining: 99 });
    expect(res.key).toBe(
      limiterKey(ann(), "search", request("/v1/search", { "x-org-id": "@client:bob" }), "search.per-org"),
    );
  });

  it("the caller and a header: one state per value in the caller's slot (its tenant's tag)", async () => {
    const { send, limits } = setup();
    await send(bob, "models", request("/v1/models", { "x-model": "gpt-4" }), 3);
    const res = (await call(limits.show, { name: "free.models" }, "key=client:bob&key=gpt-4")).json();
    expect(res).toMatchObject({
      by: "[caller, header:x-model]",
      routes: ["models"],
      values: { caller: "client:bob", "header:x-model": "gpt-4" },
      remaining: 97,
      window_seconds: 3600,
      key: "tg:{t:acme}:c:bob:free.models:h.x-model=gpt-4",
    });
    expect(res.key).toBe(
      limiterKey(bob, "models", request("/v1/models", { "x-model": "gpt-4" }), "free.models"),
    );
  });

  it("a path segment, a query parameter with the tenant, a JWT claim, an address", async () => {
    const { send, limits } = setup();
    await send(bob, "reports", request("/v1/reports/r-17"), 4);
    expect((await call(limits.show, { name: "free.reports" }, "key=r-17")).json()).toMatchObject({
      remaining: 6,
      key: limiterKey(bob, "reports", request("/v1/reports/r-17"), "free.reports"),
    });
    await send(bob, "models", request("/v1/models", { "x-model": "m" }, "?team=red"), 2);
    expect((await call(limits.show, { name: "models.per-team" }, "key=acme&key=red")).json()).toMatchObject({
      remaining: 38,
      key: limiterKey(bob, "models", request("/v1/models", {}, "?team=red"), "models.per-team"),
    });
    await send(dan, "search", request("/v1/search"), 2);
    expect((await call(limits.show, { name: "search.per-org-claim" }, "key=o-1")).json()).toMatchObject({
      remaining: 3,
      key: "tg:{search.per-org-claim:j.org=o-1}",
    });
    await send(bob, "search", request("/v1/search", {}, "?q=cats"));
    expect((await call(limits.show, { name: "free.search" }, "key=192.0.2.9&key=cats")).json()).toMatchObject(
      {
        remaining: 29,
        key: limiterKey(bob, "search", request("/v1/search", {}, "?q=cats"), "free.search"),
      },
    );
    await send(anonymous, "search", request("/v1/search"));
    expect(
      (await call(limits.show, { name: "anonymous.global" }, "key=ip:2001:db8::1")).json(),
    ).toMatchObject({
      remaining: 2,
      key: "tg:{ip:2001:db8::/64}:anonymous.global",
    });
  });

  it("a client's override: its own size, under the plan's name", async () => {
    const { send, limits } = setup();
    await send(big, "search", request("/v1/search"));
    expect((await call(limits.show, { name: "pro.global" }, "key=client:big")).json()).toMatchObject({
      limit: 50,
      remaining: 49,
      override: true,
    });
    const other = (await call(limits.show, { name: "pro.global" }, "key=client:someone")).json();
    expect(other).toMatchObject({ limit: 20, remaining: 20 });
    expect(other).not.toHaveProperty("override");
  });

  it.each([
    [
      "no key",
      "search.per-org",
      "",
      "0 key values given, 1 expected: search.per-org is kept per header:x-org-id: give ?key=<x-org-id value> (@client:<id> or @ip:<address> for a value the requests lacked)",
    ],
    [
      "too many",
      "free.global",
      "key=client:bob&key=x",
      "2 key values given, 1 expected: free.global is kept per caller: give ?key=<client:id or ip:address>",
    ],
    [
      "a tenant for a caller",
      "free.models",
      "key=tenant:acme&key=gpt-4",
      `"tenant:acme" is not a caller (client:<id> or ip:<address>): free.models is kept per [caller, header:x-model]: give ?key=<client:id or ip:address>&key=<x-model value> (@client:<id> or @ip:<address> for a value the requests lacked)`,
    ],
    [
      "two callers in one request",
      "free.models",
      "key=client:bob&key=@client:ann",
      expect.stringContaining(
        "header:x-model names client:ann, another part client:bob: a request has one caller",
      ),
    ],
    [
      "an empty value",
      "search.per-org",
      "key=",
      expect.stringContaining("the value for header:x-org-id is empty"),
    ],
    [
      "no address",
      "free.search",
      "key=nope&key=cats",
      expect.stringContaining('"nope" is not an IP address'),
    ],
    [
      "a client of another plan",
      "free.global",
      "key=client:big",
      expect.stringContaining("client:big is on plan pro, and free.global is plan free's"),
    ],
    [
      "a tenant the client is not in",
      "models.per-team",
      "key=globex&key=@client:bob",
      expect.stringContaining("client:bob is in tenant acme"),
    ],
    [
      "a value too many",
      "models.per-team",
      "key=acme&key=red&key=x",
      expect.stringContaining("3 key values given, 2 expected"),
    ],
    [
      "a segment with a slash",
      "free.reports",
      "key=a/b",
      expect.stringContaining('a path segment holds no "/"'),
    ],
  ])("%s: a 400 naming what the limit is kept per", async (_what, name, query, detail) => {
    const { limits } = setup();
    const res = await call(limits.show, { name }, query);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ type: PROBLEMS.bad_limit.type, detail });
  });

  it("an unknown name: a 404 listing the limits there are", async () => {
    const { limits } = setup();
    const res = await call(limits.show, { name: "search.nope" });
    expectProblem(res, "unknown_limit");
    expect(res.json().detail).toMatch(
      /^no limit "search.nope" in the running config; its limits: anonymous.global, free.global, /,
    );
  });

  it("DELETE resets that one key: the deny cache forgets it, other values keep their state", async () => {
    const { send, limits, asked } = setup();
    await send(bob, "search", request("/v1/search", { "x-org-id": "acme" }), 2);
    await send(bob, "search", request("/v1/search", { "x-org-id": "globex" }));
    const key = limiterKey(bob, "search", request("/v1/search", { "x-org-id": "acme" }), "search.per-org");
    const res = await call(limits.reset, { name: "search.per-org" }, "key=acme", "DELETE");
    expect(res.json()).toEqual({ name: "search.per-org", key, reset: true, keys_deleted: 1 });
    expect(asked).toEqual([`forget ${key}`, "audit ops DELETE /admin/limits search.per-org?key=acme"]);
    expect((await call(limits.show, { name: "search.per-org" }, "key=acme")).json()).toMatchObject({
      remaining: 100,
    });
    expect((await call(limits.show, { name: "search.per-org" }, "key=globex")).json()).toMatchObject({
      remaining: 99,
    });
  });
});

describe("GET /admin/callers/{caller}: keyed limits and route budgets", () => {
  it("lists the values the caller was limited by, and the shared limits it counts against", async () => {
    const { send, callers } = setup();
    await send(bob, "models", request("/v1/models", { "x-model": "gpt-4" }), 2);
    await send(bob, "models", request("/v1/models", { "x-model": "claude" }));
    await send(ann(), "models", request("/v1/models", { "x-model": "gpt-4" }));
    await send(bob, "search", request("/v1/search", { "x-org-id": "acme" }), 3);
    const body = (await call(callers.show, { caller: "client:bob" })).json();
    // The caller's own limits keep their shape.
    expect(body.limits).toEqual([
      {
        name: "free.global",
        algorithm: "token_bucket",
        limit: 10,
        remaining: 4,
        reset_seconds: 6,
        shadow: false,
        key: "tg:{t:acme}:c:bob:free.global",
      },
    ]);
    expect(body.keyed_limits).toEqual([
      {
        name: "free.models",
        by: "[caller, header:x-model]",
        algorithm: "token_bucket",
        limit: 100,
        remaining: 99,
        reset_seconds: 36,
        shadow: false,
        key: "tg:{t:acme}:c:bob:free.models:h.x-model=claude",
      },
      expect.objectContaining({ remaining: 98, key: "tg:{t:acme}:c:bob:free.models:h.x-model=gpt-4" }),
      expect.objectContaining({
        name: "models.per-team",
        by: "[tenant, query:team]",
        remaining: 37,
        key: "tg:{t:acme}:models.per-team:q.team@client%3abob",
      }),
    ]);
    expect(body.keyed_limits_truncated).toBe(false);
    expect(body.shared_limits).toEqual([
      {
        name: "free.reports",
        by: "segment:3",
        algorithm: "token_bucket",
        limit: 10,
        shadow: false,
        routes: ["reports"],
        inspect: "/admin/limits/free.reports?key=<path segment 3>",
        key_when_missing: "@client:bob",
      },
      {
        name: "search.total",
        by: "route",
        algorithm: "token_bucket",
        limit: 1000,
        remaining: 997,
        reset_seconds: 1,
        shadow: false,
        key: "tg:{search.total:r=search}",
        route: "search",
      },
      expect.objectContaining({
        name: "search.per-org",
        inspect: "/admin/limits/search.per-org?key=<x-org-id value>",
      }),
      expect.objectContaining({
        name: "search.per-org-claim",
        by: "claim:org",
        key_when_missing: "@client:bob",
      }),
    ]);
    // Its tenant's limit kept per tenant and ?team= binds it too; bob never sent a team, so it
    // was kept per bob (the fallback) under the tenant's tag.
  });

  it("a tenant shows the keys kept per it and request values; an address those of its callers", async () => {
    const { send, callers } = setup();
    await send(bob, "models", request("/v1/models", { "x-model": "m" }, "?team=red"));
    const tenant = (await call(callers.show, { caller: "tenant:acme" })).json();
    expect(tenant.keyed_limits).toEqual([
      expect.objectContaining({
        name: "models.per-team",
        remaining: 39,
        key: "tg:{t:acme}:models.per-team:q.team=red",
      }),
    ]);
    expect(tenant).not.toHaveProperty("shared_limits");
    await send(bob, "search", request("/v1/search", {}, "?q=cats"));
    const address = (await call(callers.show, { caller: "ip:192.0.2.9" })).json();
    expect(address.keyed_limits).toEqual([
      expect.objectContaining({
        name: "free.search",
        remaining: 29,
        key: "tg:{ip:192.0.2.9}:free.search:q.q=cats",
      }),
    ]);
    // An anonymous caller meets the route's own limits too.
    expect(address.shared_limits).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "search.per-org", key_when_missing: "@ip:192.0.2.9" }),
      ]),
    );
  });

  it("a caller without keyed or shared limits answers as before", async () => {
    const plain = runtimeOf(`
store: { url: "memory://", prefix: "tg:" }
upstreams: { api: "http://127.0.0.1:1" }
clients: [{ id: acme, key: acme-key, plan: team }]
plans: { team: { global: { rate: 5/s, burst: 10 } } }
routes: [{ name: default, match: { path: / }, upstream: api }]
`);
    const store = new MemoryStore({ sweepIntervalMs: 0, now: () => NOW });
    const endpoints = callerEndpoints({
      runtime: () => plain,
      store: () => store,
      limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
      fromStore: fromStoreDescribedBy(String),
      audit: { write: async () => {} },
    });
    const body = (await call(endpoints.show, { caller: "client:acme" })).json();
    expect(Object.keys(body)).toEqual(["caller", "plan", "tenant", "limits", "recent_denials"]);
  });

  it("a listing cut short says so", async () => {
    const { store, callers } = setup();
    // Written straight to the store: bob's own free.global would deny this many requests.
    const models = clientPlan("bob").limits.filter((l) => l.spec.name === "free.models");
    for (let i = 0; i <= KEYED_LISTING.maxKeys; i++) {
      const req = request("/v1/models", { "x-model": `m${i}` });
      await store.check(limitChecks("tg:", models, bob, route("models"), req));
    }
    const body = (await call(callers.show, { caller: "client:bob" })).json();
    expect(body.keyed_limits).toHaveLength(KEYED_LISTING.maxKeys);
    expect(body.keyed_limits_truncated).toBe(true);
  });

  it("a store that cannot list keys shows none, and says the listing is incomplete", async () => {
    const memory = new MemoryStore({ sweepIntervalMs: 0, now: () => NOW });
    const unlisting = Object.assign(Object.create(memory) as MemoryStore, { listKeys: undefined });
    const { send, callers } = setup(unlisting);
    await send(bob, "models", request("/v1/models", { "x-model": "gpt-4" }));
    const body = (await call(callers.show, { caller: "client:bob" })).json();
    expect(body).toMatchObject({ keyed_limits: [], keyed_limits_truncated: true });
  });

  it("DELETE resets the caller's keyed keys with its own, and leaves the shared ones", async () => {
    const { send, callers, asked, store } = setup();
    await send(bob, "models", request("/v1/models", { "x-model": "gpt-4" }, "?team=red"));
    await send(bob, "search", request("/v1/search", { "x-org-id": "acme" }));
    const res = await call(callers.reset, { caller: "client:bob" }, "", "DELETE");
    const keyed = "tg:{t:acme}:c:bob:free.models:h.x-model=gpt-4";
    // Its tenant's keys too, as a client's reset always reset its tenant's limit.
    const tenants = "tg:{t:acme}:models.per-team:q.team=red";
    expect(asked).toEqual([
      `forget tg:{t:acme}:c:bob:free.global ${keyed} ${tenants} tg:{t:acme}:c:bob:denials`,
      "audit ops DELETE /admin/callers client:bob",
    ]);
    expect(res.json()).toEqual({
      caller: "client:bob",
      reset: true,
      keys_deleted: 3,
      keyed_limits_truncated: false,
    });
    expect((store as MemoryStore).read(keyed)).toBeNull();
    expect((store as MemoryStore).read("tg:{search.total:r=search}")).not.toBeNull();
  });

  it("a keyed limit's prefix starts every key the limiter writes for it", () => {
    const models = clientPlan("bob").limits.find((l) => l.spec.name === "free.models")!;
    const teams = route("models").limits[0]!;
    fc.assert(
      fc.property(
        fc.string(),
        fc.string({ maxLength: 100 }),
        fc.option(fc.string()),
        fc.constantFrom<Caller>(bob, big, anonymous, dan),
        (model, team, tenant, who) => {
          const caller: Caller = who.kind === "client" && tenant !== null ? { ...who, tenant } : who;
          const req = request("/v1/models", { "x-model": model }, `?${new URLSearchParams({ team })}`);
          for (const limit of [models, teams]) {
            const written = limitChecks("tg:", [limit], caller, route("models"), req)[0]!.key;
            expect(written.startsWith(keyedPrefix("tg:", limit, caller))).toBe(true);
          }
        },
      ),
    );
  });
});

describe("MemoryStore.listKeys", () => {
  it("lists live keys under the prefixes, within its bounds", async () => {
    let now = NOW;
    const store = new MemoryStore({ sweepIntervalMs: 0, now: () => now });
    const spec = { algorithm: "fixed_window", name: "p.x", limit: 5, windowMs: 1000 } as const;
    const write = (key: string, windowMs = 1000) =>
      store.check([{ key, spec: { ...spec, windowMs }, cost: 1 }]);
    for (const key of ["a:1", "a:2", "b:1", "ab:1"]) await write(key);
    await write("a:3", 60_000);
    const all = { maxKeys: 10, maxScanned: 100 };
    expect(await store.listKeys(["a:"], all)).toEqual({ keys: ["a:1", "a:2", "a:3"], complete: true });
    expect(await store.listKeys(["a:", "b:"], all)).toEqual({
      keys: ["a:1", "a:2", "b:1", "a:3"],
      complete: true,
    });
    expect(await store.listKeys(["a:"], { maxKeys: 2, maxScanned: 100 })).toEqual({
      keys: ["a:1", "a:2"],
      complete: false,
    });
    expect(await store.listKeys(["a:"], { maxKeys: 10, maxScanned: 2 })).toEqual({
      keys: ["a:1", "a:2"],
      complete: false,
    });
    now += 2000;
    expect(await store.listKeys(["a:"], all)).toEqual({ keys: ["a:3"], complete: true });
  });
});

describe("the route table", () => {
  function admin(store: Partial<Inspector>) {
    return createAdminHandler({
      runtime: () => rt,
      store: () => store as Store,
      limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
      metrics: new Metrics(),
      reload: async () => ({ ok: true, version: "v", changed: false, restartRequired: [] }),
    });
  }
  async function ask(method: string, url: string, store: Partial<Inspector> = {}) {
    const res = fakeResponse();
    const headers: [string, string][] = [
      ["host", "admin"],
      ["authorization", `Bearer ${TOKEN}`],
    ];
    await admin(store)(fakeRequest({ method, url, headers }), res);
    return res;
  }
  const store = {
    peek: async () => [{ remaining: 5, resetMs: 0 }],
    reset: async () => 1,
  };

  it("GET, HEAD and DELETE reach the endpoint; other methods are a 405 naming them", async () => {
    for (const method of ["GET", "HEAD"]) {
      const res = await ask(method, "/admin/limits/search.total", store);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ name: "search.total", remaining: 5 });
    }
    expect((await ask("DELETE", "/admin/limits/search.per-org?key=acme", store)).json()).toMatchObject({
      reset: true,
    });
    const put = await ask("PUT", "/admin/limits/search.total");
    expect(put.statusCode).toBe(405);
    expect(put.headers.allow).toBe("GET, HEAD, DELETE");
  });

  it("a name that is not UTF-8 is a 400 bad-limit; one of two segments is no endpoint", async () => {
    expectProblem(await ask("GET", "/admin/limits/search.%80"), "bad_limit");
    expectProblem(await ask("GET", "/admin/limits/a/b"), "no_endpoint");
  });
});

function ann(): Caller {
  return { kind: "client", id: "ann", plan: clientPlan("ann"), tenant: undefined, ipKey: "192.0.2.7" };
}
