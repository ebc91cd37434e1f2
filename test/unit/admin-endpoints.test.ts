// The operator API's endpoints called as the router calls them (src/admin/endpoints/): what
// each reads and writes, and what it answers, with a fake store and no router or socket.
import { describe, expect, it } from "vitest";
import { callerEndpoints, denialCount, newestFirst } from "../../src/admin/endpoints/callers.js";
import { showConfig } from "../../src/admin/endpoints/config.js";
import { topCount, topDenials, windowMinutes } from "../../src/admin/endpoints/denials.js";
import { reloadConfig } from "../../src/admin/endpoints/reload.js";
import { ProblemError } from "../../src/admin/reply.js";
import type { AdminHandler } from "../../src/admin/router.js";
import { fromStoreDescribedBy } from "../../src/admin/store-failure.js";
import { PROBLEMS } from "../../src/http/problem.js";
import type { LimitCheck } from "../../src/limits/spec.js";
import { lastHourTopKeys } from "../../src/limits/state-keys.js";
import type { StoredKey } from "../../src/operator-state/api-keys.js";
import type { AuditWrite } from "../../src/operator-state/audit.js";
import { fakeRequest, fakeResponse, NOW, runtimeOf } from "./support/proxy-fakes.js";

const rt = runtimeOf(`
store: { url: "memory://", prefix: "tg:" }
upstreams: { api: "http://127.0.0.1:1" }
clients: [{ id: acme, key: acme-key, plan: team, tenant: t1 }]
plans:
  anonymous: { global: { rate: 1/s, burst: 2 } }
  team:
    global: { rate: 5/s, burst: 10 }
    tenant: { rate: 100/m, burst: 100 }
routes: [{ name: default, match: { path: / }, upstream: api }]
`);

async function call(handler: AdminHandler, params: Record<string, string> = {}, query = "", method = "GET") {
  const res = fakeResponse();
  const principal = { name: "ops", scope: "write" } as const;
  await handler({ req: fakeRequest({ method }), res, params, query: new URLSearchParams(query), principal });
  return res;
}

/** A store that records what it is asked and answers from `views`. */
function fakeStore(fail?: Error) {
  const asked: string[] = [];
  const maybeFail = () => {
    if (fail) throw fail;
  };
  return {
    asked,
    store: {
      peek: async (checks: readonly LimitCheck[]) => {
        maybeFail();
        asked.push(`peek ${checks.map((c) => c.key).join(" ")}`);
        return checks.map((_, i) => ({ remaining: 7 - i, resetMs: 1500 }));
      },
      reset: async (keys: readonly string[]) => {
        maybeFail();
        asked.push(`reset ${keys.join(" ")}`);
        return keys.length - 1;
      },
      denials: async (logKey: string) => {
        maybeFail();
        asked.push(`denials ${logKey}`);
        return [{ atMs: NOW, route: "default", limits: ["team.global"] }];
      },
      topDenials: async (topKeys: readonly string[], n: number) => {
        maybeFail();
        asked.push(`top ${n} ${topKeys.length} ${topKeys[0]}`);
        return [{ caller: "client:acme", count: 12 }];
      },
    },
  };
}

/** A client's keys as the key store lists them (oldest first), at their defaults. */
function storedKeys(client: string, ...keys: Partial<StoredKey>[]): StoredKey[] {
  return keys.map((k, i) => ({
    id: `key_${String(i).repeat(12)}`,
    hash: "0".repeat(64),
    client,
    plan: "team",
    tenant: undefined,
    limits: undefined,
    createdAtMs: NOW - 1000 * (keys.length - i),
    expiresAtMs: undefined,
    ...k,
  }));
}

function endpoints(fail?: Error, keysOf?: (client: string) => StoredKey[]) {
  const { asked, store } = fakeStore(fail);
  const limiter = {
    flushDenials: async () => {
      asked.push("flush");
    },
    forgetDenials: (keys: Iterable<string>) => {
      asked.push(`forget ${[...keys].join(" ")}`);
    },
  };
  const fromStore = fromStoreDescribedBy((err) => `described: ${(err as Error).message}`);
  // Audit entries join what was asked, so a test sees that one is written after the reset.
  const audit = {
    write: async (e: AuditWrite) => {
      asked.push(`audit ${e.token} ${e.action} ${e.target}`);
    },
  };
  const keys = keysOf && {
    list: async (client: string) => {
      asked.push(`keys ${client}`);
      return keysOf(client);
    },
  };
  const deps = {
    runtime: () => rt,
    store: () => store,
    limiter: () => limiter,
    fromStore,
    now: () => NOW,
    audit,
    ...(keys ? { keys: () => keys } : {}),
  };
  return { asked, audit, callers: callerEndpoints(deps), top: topDenials(deps) };
}

describe("GET /admin/callers/{caller...}", () => {
  it("flushes pending denials, then peeks at every limit and reads the denial log", async () => {
    const { asked, callers } = endpoints();
    const res = await call(callers.show, { caller: "client:acme" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["cache-control"]).toBe("no-store");
    expect(asked[0]).toBe("flush");
    // All of one caller's keys under its tenant's hash tag (limits/state-keys.ts).
    expect(asked.slice(1).sort()).toEqual([
      "denials tg:{t:t1}:c:acme:denials",
      "peek tg:{t:t1}:c:acme:team.global tg:{t:t1}:team.tenant",
    ]);
    expect(res.json()).toEqual({
      caller: "client:acme",
      plan: "team",
      tenant: "t1",
      limits: [
        {
          name: "team.global",
          algorithm: "token_bucket",
          limit: 10,
          remaining: 7,
          reset_seconds: 2,
          shadow: false,
          key: "tg:{t:t1}:c:acme:team.global",
        },
        {
          name: "team.tenant",
          algorithm: "token_bucket",
          limit: 100,
          remaining: 6,
          reset_seconds: 2,
          shadow: false,
          key: "tg:{t:t1}:team.tenant",
        },
      ],
      recent_denials: [{ time: new Date(NOW).toISOString(), route: "default", limits: ["team.global"] }],
    });
  });

  it("lists recent denials newest first across instances, as many as ?limit= asks", () => {
    // As two instances flushed them: each its own second's denials, interleaved in the log.
    const log = [3, 1, 4, 2, 5].map((s) => ({
      atMs: NOW + s * 1000,
      route: `r${s}`,
      limits: ["team.global"],
    }));
    expect(newestFirst(log, denialCount(null)).map((d) => d.route)).toEqual(["r5", "r4", "r3", "r2", "r1"]);
    expect(newestFirst(log, denialCount("2")).map((d) => d.route)).toEqual(["r5", "r4"]);
    expect([denialCount("0"), denialCount("1000"), denialCount("x"), denialCount("2.7")]).toEqual([
      1, 50, 50, 2,
    ]);
    // The log as it was: not reordered in place.
    expect(log.map((d) => d.route)).toEqual(["r3", "r1", "r4", "r2", "r5"]);
  });

  it("a JWT caller takes its plan and tenant from the query", async () => {
    const { callers } = endpoints();
    const res = await call(callers.show, { caller: "client:bob" }, "plan=team&tenant=t9");
    expect(res.json()).toMatchObject({ caller: "client:bob", plan: "team", tenant: "t9" });
  });

  it("a client known only by keys issued at runtime is read under its servable keys' plans, newest first", async () => {
    // The newest key's plan is not in the config (a reload removed it): the two before serve,
    // on the same plan but one with a tenant and its own burst: the client is limited under both.
    const keys = storedKeys(
      "keyed",
      { plan: "team" },
      { plan: "team", tenant: "t7", limits: { global: { rate: "1/s", burst: 3 } } },
      { plan: "gone" },
    );
    const { asked, callers } = endpoints(undefined, (client) => (client === "keyed" ? keys : []));
    const res = await call(callers.show, { caller: "client:keyed" }, "plan=anonymous&tenant=t9");
    expect(res.statusCode).toBe(200);
    expect(asked.slice(0, 2)).toEqual(["keys keyed", "flush"]);
    // What its requests are limited under, not what the query says: the newest servable key's
    // own burst of 3 under its tenant's hash tag, marked as the client's own size, then what the
    // older key adds.
    expect(res.json()).toMatchObject({
      caller: "client:keyed",
      plan: "team",
      tenant: "t7",
      plan_from_key: keys[1]!.id,
      key_plans: [
        { key: keys[1]!.id, plan: "team" },
        { key: keys[0]!.id, plan: "team" },
      ],
      limits: [
        { name: "team.global", limit: 3, override: true, key: "tg:{t:t7}:c:keyed:team.global" },
        { name: "team.tenant", limit: 100, key: "tg:{t:t7}:team.tenant" },
        { name: "team.global", limit: 10, key: "tg:{c:keyed}:team.global" },
      ],
    });
    expect(JSON.stringify(res.json())).not.toContain(keys[1]!.hash);
    // A reset takes every one of them.
    asked.length = 0;
    expect((await call(callers.reset, { caller: "client:keyed" }, "", "DELETE")).statusCode).toBe(200);
    const reset = asked.find((a) => a.startsWith("reset "))!;
    for (const key of ["tg:{t:t7}:c:keyed:team.global", "tg:{t:t7}:team.tenant", "tg:{c:keyed}:team.global"])
      expect(reset.split(" ")).toContain(key);
  });

  it("a configured client's keys are never listed; a client with no servable key is unknown", async () => {
    const { asked, callers } = endpoints(undefined, (client) =>
      client === "stale" ? storedKeys(client, { plan: "gone" }) : [],
    );
    expect((await call(callers.show, { caller: "client:acme" })).json()).not.toHaveProperty("plan_from_key");
    expect(asked).not.toContain("keys acme");
    for (const caller of ["client:stale", "client:ghost"]) {
      const res = await call(callers.show, { caller });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({
        type: PROBLEMS.unknown_caller.type,
        detail: expect.stringContaining("in a stored API key the config can serve"),
      });
    }
    // A JWT caller (no key names it) still takes the query's word.
    const jwt = await call(callers.show, { caller: "client:jwt:bob" }, "plan=team&tenant=t9");
    expect(jwt.json()).toMatchObject({ plan: "team", tenant: "t9" });
    expect(jwt.json()).not.toHaveProperty("plan_from_key");
  });

  it("an IPv6 caller named as /admin/denials/top names it (its /64) reads the same keys as any address in it", async () => {
    const keysOf = async (caller: string) => {
      const res = await call(endpoints().callers.show, { caller });
      expect(res.statusCode, caller).toBe(200);
      return (res.json() as { limits: { key: string }[] }).limits.map((l) => l.key);
    };
    const group = await keysOf("ip:2001:db8:1:2::/64");
    expect(group).toEqual(["tg:{ip:2001:db8:1:2::/64}:anonymous.global"]);
    expect(await keysOf("ip:2001:db8:1:2:ffff::9")).toEqual(group);
    for (const caller of ["ip:2001:db8::/48", "ip:10.0.0.0/64", "ip:2001:db8::/64/64", "ip:/64"]) {
      const res = await call(endpoints().callers.show, { caller });
      expect(res.statusCode, caller).toBe(400);
    }
  });

  it.each([
    ["not a caller name", "nobody", "bad_caller"],
    ["an empty name", "", "bad_caller"],
    ["an IP that is no address", "ip:nope", "bad_caller"],
    ["a client not in the config", "client:ghost", "unknown_caller"],
  ] as const)("%s: its problem, and the store is never asked", async (_what, caller, code) => {
    const { asked, callers } = endpoints();
    const res = await call(callers.show, { caller });
    expect(res.statusCode).toBe(PROBLEMS[code].status);
    expect(res.json()).toMatchObject({ type: PROBLEMS[code].type });
    expect(asked).toEqual([]);
  });

  it("a store that fails: a ProblemError store_unavailable in the operator's words", async () => {
    const { callers } = endpoints(new Error("Stream isn't writeable"));
    const failed = call(callers.show, { caller: "client:acme" });
    await expect(failed).rejects.toBeInstanceOf(ProblemError);
    await expect(failed).rejects.toMatchObject({
      code: "store_unavailable",
      message: "described: Stream isn't writeable",
    });
  });
});

describe("DELETE /admin/callers/{caller...}", () => {
  it("forgets the caller's cached denials, then deletes its limits and its denial log", async () => {
    const { asked, callers } = endpoints();
    const res = await call(callers.reset, { caller: "client:acme" }, "", "DELETE");
    const keys = "tg:{t:t1}:c:acme:team.global tg:{t:t1}:team.tenant tg:{t:t1}:c:acme:denials";
    expect(asked).toEqual([
      "flush",
      `forget ${keys}`,
      `reset ${keys}`,
      "audit ops DELETE /admin/callers client:acme",
    ]);
    expect(res.json()).toEqual({ caller: "client:acme", reset: true, keys_deleted: 2 });
  });

  it("a tenant has no denial log of its own", async () => {
    const { asked, callers } = endpoints();
    await call(callers.reset, { caller: "tenant:t1" }, "", "DELETE");
    expect(asked).toEqual([
      "flush",
      "forget tg:{t:t1}:team.tenant",
      "reset tg:{t:t1}:team.tenant",
      "audit ops DELETE /admin/callers tenant:t1",
    ]);
  });

  it("writes no audit entry when it did nothing: an unknown caller, or the store down", async () => {
    const unknown = endpoints();
    expect((await call(unknown.callers.reset, { caller: "client:nobody" }, "", "DELETE")).statusCode).toBe(
      404,
    );
    const down = endpoints(new Error("connection refused"));
    await expect(call(down.callers.reset, { caller: "client:acme" }, "", "DELETE")).rejects.toThrow(
      ProblemError,
    );
    for (const { asked } of [unknown, down]) expect(asked.filter((a) => a.startsWith("audit"))).toEqual([]);
  });
});

describe("GET /admin/denials/top", () => {
  it("n is 10 unless a number, then kept within 1..1000", () => {
    expect(topCount(null)).toBe(10);
    expect(topCount("abc")).toBe(10);
    expect(topCount("0")).toBe(10);
    expect(topCount("-5")).toBe(1);
    expect(topCount("25")).toBe(25);
    expect(topCount("99999")).toBe(1000);
  });

  it("flushes, then sums the last hour's buckets", async () => {
    const { asked, top } = endpoints();
    const res = await call(top, {}, "n=3");
    expect(asked).toEqual(["flush", `top 3 12 ${lastHourTopKeys("tg:", NOW)[0]}`]);
    expect(res.json()).toEqual({ window_seconds: 3600, callers: [{ caller: "client:acme", denials: 12 }] });
  });

  it("?minutes= sums fewer buckets: 5 is the current one, 15 the last three", async () => {
    expect([null, "5", "15", "60"].map(windowMinutes)).toEqual([60, 5, 15, 60]);
    expect(["0", "7", "65", "1e1", "x", ""].map(windowMinutes)).toEqual(Array(6).fill(undefined));
    const { asked, top } = endpoints();
    const res = await call(top, {}, "minutes=15");
    expect(asked[1]).toBe(`top 10 3 ${lastHourTopKeys("tg:", NOW)[0]}`);
    expect(res.json()).toMatchObject({ window_seconds: 900 });
    const bad = await call(top, {}, "minutes=7");
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ type: "https://tollgate.dev/problems/bad-denials-query" });
  });
});

describe("GET /admin/config and POST /admin/reload", () => {
  it("the config as describe-config.ts writes it", async () => {
    const res = await call(showConfig(() => rt));
    expect(res.json()).toMatchObject({ version: rt.version, store: { kind: "memory", prefix: "tg:" } });
  });

  it("a reload that succeeded says what it changed", async () => {
    const written: AuditWrite[] = [];
    const res = await call(
      reloadConfig({
        reload: async () => ({ ok: true, version: "v2", changed: true, restartRequired: ["listen"] }),
        file: () => "/etc/tollgate/gateway.yaml",
        audit: { write: async (e) => void written.push(e) },
      }),
      {},
      "",
      "POST",
    );
    expect(written).toEqual([
      { token: "ops", action: "POST /admin/reload", target: "/etc/tollgate/gateway.yaml" },
    ]);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      status: "reloaded",
      version: "v2",
      changed: true,
      restart_required: ["listen"],
    });
  });

  it("a refused file: 400 config-refused with each problem, the attempt audited", async () => {
    const written: AuditWrite[] = [];
    const res = await call(
      reloadConfig({
        reload: async () => ({
          ok: false,
          problems: [
            { file: "gw.yaml", line: 3, column: 5, path: "routes", message: "at least one route is needed" },
          ],
        }),
        file: () => "gw.yaml",
        audit: { write: async (e) => void written.push(e) },
      }),
    );
    expect(written).toEqual([{ token: "ops", action: "POST /admin/reload", target: "gw.yaml" }]);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      type: PROBLEMS.config_refused.type,
      detail: "the config file was refused; the previous config keeps serving",
      errors: [expect.stringContaining("at least one route is needed")],
    });
  });
});
