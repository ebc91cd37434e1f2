// Named admin tokens with scopes, and the audit log, on a gateway sharing a real Redis: a read
// token is refused every write endpoint of the route table (a new one is covered without a change
// here), every write a write token makes is listed at GET /admin/audit by the token's name, the
// stream is trimmed by time and expires, a failed entry is counted and never fails the request,
// and no admin token or issued key appears in the logs, /metrics or the audit.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AdminDeps, operatorRoutes } from "../../src/admin/server.js";
import type { Store } from "../../src/limits/stores/contract.js";
import { Metrics } from "../../src/observability/metrics.js";
import { auditKey, RedisAuditLog } from "../../src/operator-state/audit.js";
import { type InProcessGateway, metricValue, startGateway } from "../support/gateway.js";
import { type Reply, send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const OPS = "ops-token-for-audit-tests-5f2a9c";
const VIEWER = "viewer-token-for-audit-tests-81d0e4";
const PREFIX = "aud:";

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: InProcessGateway;

const admin = (token: string, method: string, path: string, body?: unknown): Promise<Reply> =>
  send(gw.adminUrl, {
    method,
    path,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

type AuditEntry = { time: string; token: string; action: string; target: string };
const auditEntries = async (limit = 100): Promise<AuditEntry[]> => {
  const r = await admin(VIEWER, "GET", `/admin/audit?limit=${limit}`);
  expect(r.status, r.body).toBe(200);
  return r.json<{ entries: AuditEntry[] }>().entries;
};

/** The write routes of the operator API as the admin handler builds its table. */
function writeRoutes(): string[] {
  const deps: AdminDeps = {
    runtime: () => gw.gateway.currentRuntime,
    store: () => ({}) as Store,
    limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
    usage: () => ({ read: async () => ({}) as never, listPage: async () => ({}) as never }),
    metrics: new Metrics(),
    reload: async () => ({ ok: true, version: "v", changed: false, restartRequired: [] }),
  };
  return operatorRoutes(deps)
    .filter((r) => r.method !== "GET" && r.method !== "HEAD")
    .map((r) => `${r.method} ${r.pattern}`);
}

/** A path each pattern matches, its parameters filled in with plausible values. */
const pathOf = (route: string) =>
  route
    .split(" ")[1]!
    .replace(/\{(\w+)(\.\.\.)?\}/g, (_m, name: string) =>
      name === "caller" ? "client:acme" : name === "name" ? "free.global" : "key_aaaaaaaaaaaa",
    );

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await startGateway(
    `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  tokens:
    - { name: ops, token: "\${OPS_TOKEN}", scope: write }
    - { name: viewer, token: "\${VIEWER_TOKEN}", scope: read }
  audit_retention: 2h
log: { level: info, requests: true }
store: { url: "${redis.url}", prefix: "${PREFIX}" }
upstreams: { api: ${upstream.url} }
clients:
  - { id: acme, key: acme-key, plan: free }
plans:
  free: { global: { rate: 1/s, burst: 5 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
    { OPS_TOKEN: OPS, VIEWER_TOKEN: VIEWER },
  );
});
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

describe("a read token", () => {
  it("gets 403 insufficient_scope on every write endpoint of the route table, and changes nothing", async () => {
    const writes = writeRoutes();
    expect(writes).toEqual(
      expect.arrayContaining([
        "DELETE /admin/callers/{caller...}",
        "DELETE /admin/limits/{name}",
        "POST /admin/reload",
      ]),
    );
    await send(gw.url, { path: "/x", headers: { "x-api-key": "acme-key" } });
    const before = await admin(OPS, "GET", "/admin/callers/client:acme");
    for (const route of writes) {
      const r = await admin(VIEWER, route.split(" ")[0]!, pathOf(route), {});
      expect(r.status, `${route}: ${r.body}`).toBe(403);
      expect(r.headers["content-type"]).toBe("application/problem+json");
      expect(r.json()).toMatchObject({
        required_scope: "write",
        detail: expect.stringContaining('"viewer"'),
      });
    }
    // The caller's state is what it was, and nothing was audited.
    expect((await admin(OPS, "GET", "/admin/callers/client:acme")).json().limits).toEqual(
      before.json().limits,
    );
    expect(await auditEntries()).toEqual([]);
  });

  it("reads: the config, a caller, the audit", async () => {
    for (const path of ["/admin/config", "/admin/callers/client:acme", "/admin/audit"])
      expect((await admin(VIEWER, "GET", path)).status, path).toBe(200);
  });

  it("an unknown token stays 401", async () => {
    expect((await admin(`${VIEWER}x`, "DELETE", "/admin/callers/client:acme")).status).toBe(401);
    expect((await admin("", "GET", "/admin/audit")).status).toBe(401);
  });
});

/** Keys and ids issued along the way: none may appear in a log line, /metrics or the audit. */
const issuedKeys: string[] = [];

describe("a write token", () => {
  /**
   * How to make each write endpoint act, in order (a key is created before it is rotated and
   * revoked), and the action its audit entry names. A write route of the table missing here fails
   * the test: add it, and make its endpoint call audited().
   */
  const ids: string[] = [];
  const recipes: { route: string; act: () => Promise<Reply>; action: string; target?: () => string }[] = [
    {
      route: "DELETE /admin/callers/{caller...}",
      act: () => admin(OPS, "DELETE", "/admin/callers/client:acme"),
      action: "DELETE /admin/callers",
      target: () => "client:acme",
    },
    {
      route: "DELETE /admin/limits/{name}",
      act: () => admin(OPS, "DELETE", "/admin/limits/free.global?key=client:acme"),
      action: "DELETE /admin/limits",
      target: () => "free.global?key=client:acme",
    },
    {
      route: "POST /admin/reload",
      act: () => admin(OPS, "POST", "/admin/reload"),
      action: "POST /admin/reload",
      target: () => gw.gateway.currentRuntime.file,
    },
    {
      route: "POST /admin/keys",
      act: async () => {
        const r = await admin(OPS, "POST", "/admin/keys", { client: "newco", plan: "free" });
        if (r.status === 201) {
          ids.push(r.json<{ id: string }>().id);
          issuedKeys.push(r.json<{ key: string }>().key);
        }
        return r;
      },
      action: "POST /admin/keys",
      target: () => `${ids[0]} (client:newco, plan free, no expiry)`,
    },
    {
      route: "POST /admin/keys/{id}/rotate",
      act: async () => {
        const r = await admin(OPS, "POST", `/admin/keys/${ids[0]}/rotate`, { grace: "2s" });
        if (r.status === 201) {
          ids.push(r.json<{ id: string }>().id);
          issuedKeys.push(r.json<{ key: string }>().key);
        }
        return r;
      },
      action: "POST /admin/keys/rotate",
      target: () => `${ids[0]} -> ${ids[1]} (client:newco, grace 2s)`,
    },
    {
      route: "DELETE /admin/keys/{id}",
      act: () => admin(OPS, "DELETE", `/admin/keys/${ids[1]}`),
      action: "DELETE /admin/keys",
      target: () => `${ids[1]} (client:newco)`,
    },
    {
      route: "PUT /admin/overrides/{caller}/{name}",
      act: () =>
        admin(OPS, "PUT", "/admin/overrides/client:acme/free.global", {
          burst: 20,
          rate: "10/s",
          expires_in: "1m",
          reason: "launch",
        }),
      action: "PUT /admin/overrides",
      target: () => "client:acme/free.global {burst: 20, rate: 10/s} for 1m: launch",
    },
    {
      route: "DELETE /admin/overrides/{caller}/{name}",
      act: () => admin(OPS, "DELETE", "/admin/overrides/client:acme/free.global"),
      action: "DELETE /admin/overrides",
      target: () => "client:acme/free.global",
    },
  ];

  it("has a recipe for every write route of the table", () => {
    expect(recipes.map((r) => r.route).sort()).toEqual(writeRoutes().sort());
  });

  it("every write it makes appears in GET /admin/audit under its name, newest first", async () => {
    const started = Date.now();
    for (const recipe of recipes) {
      const r = await recipe.act();
      expect(r.status, `${recipe.route}: ${r.body}`).toBeLessThan(300);
      const [newest] = await auditEntries(1);
      expect(newest, recipe.route).toMatchObject({ token: "ops", action: recipe.action });
      if (recipe.target) expect(newest!.target, recipe.route).toBe(recipe.target());
    }
    const all = await auditEntries();
    expect(all.map((e) => e.action)).toEqual(recipes.map((r) => r.action).reverse());
    for (const e of all) {
      expect(Object.keys(e)).toEqual(["time", "token", "action", "target"]);
      expect(e.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Date.parse(e.time)).toBeGreaterThanOrEqual(started - 1000);
    }
    expect(await auditEntries(2)).toEqual(all.slice(0, 2));
  });

  it("the entries are a stream in the store's Redis that expires after admin.audit_retention", async () => {
    const key = auditKey(PREFIX);
    expect(key).toBe("aud:{rt}:audit");
    expect(await redis.client.type(key)).toBe("stream");
    expect(await redis.client.xlen(key)).toBe((await auditEntries()).length);
    const ttl = await redis.client.pttl(key);
    expect(ttl).toBeGreaterThan(7_200_000 - 60_000);
    expect(ttl).toBeLessThanOrEqual(7_200_000);
  });
});

describe("the stream is bounded", () => {
  const HOUR = 3_600_000;

  it("by time: entries older than the retention are trimmed as new ones come, and never listed", async () => {
    // One entry per stream node, so that the approximate trim (MINID ~, which frees whole nodes)
    // shows at this small scale what it does to a large stream.
    await redis.client.config("SET", "stream-node-max-entries", "1");
    const key = auditKey("trim:");
    const now = Date.now();
    for (let i = 0; i < 5; i++)
      await redis.client.xadd(
        key,
        `${now - 3 * HOUR + i}-0`,
        "token",
        "ops",
        "action",
        "old",
        "target",
        `t${i}`,
      );
    const log = new RedisAuditLog(redis.client, 1000, {
      settings: () => ({ prefix: "trim:", retentionMs: 2 * HOUR }),
      now: () => now,
    });
    expect(await log.list(100)).toEqual([]); // past the retention: never listed, trimmed or not
    await log.write({ token: "ops", action: "new", target: "t" });
    expect(await redis.client.xlen(key)).toBe(1);
    expect((await log.list(100)).map((e) => e.action)).toEqual(["new"]);
    // An injected clock past the retention of the newest entry: nothing is listed any more.
    const later = new RedisAuditLog(redis.client, 1000, {
      settings: () => ({ prefix: "trim:", retentionMs: 2 * HOUR }),
      now: () => now + 2 * HOUR + 1000,
    });
    expect(await later.list(100)).toEqual([]);
  });

  it("by count, whatever the retention", async () => {
    const key = auditKey("count:");
    const log = new RedisAuditLog(redis.client, 1000, {
      settings: () => ({ prefix: "count:", retentionMs: 2 * HOUR }),
      maxEntries: 10,
    });
    for (let i = 0; i < 50; i++) await log.write({ token: "ops", action: "a", target: `t${i}` });
    expect(await redis.client.xlen(key)).toBe(10);
    expect((await log.list(3)).map((e) => e.target)).toEqual(["t49", "t48", "t47"]);
  });
});

describe("an entry the store cannot take", () => {
  it("is counted and logged, and the request that acted is still answered", async () => {
    const errorsBefore = await metricValue(
      gw.adminUrl,
      /^tollgate_store_errors_total\{reason="timeout"\} (\S+)$/m,
    );
    redis.pause();
    try {
      const r = await admin(OPS, "POST", "/admin/reload");
      expect(r.status, r.body).toBe(200);
      expect(r.ms).toBeLessThan(2000);
    } finally {
      redis.resume();
    }
    const errorsAfter = await metricValue(
      gw.adminUrl,
      /^tollgate_store_errors_total\{reason="timeout"\} (\S+)$/m,
    );
    expect(errorsAfter).toBeGreaterThan(errorsBefore);
    expect(gw.logs.lines.some((l) => l.msg === "audit entry not written")).toBe(true);
  });
});

describe("secrets", () => {
  it("no admin token or issued key appears in a log line, /metrics, the audit or its stream", async () => {
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    const audit = JSON.stringify(await auditEntries(1000));
    const stream = JSON.stringify(await redis.client.xrange(auditKey(PREFIX), "-", "+"));
    const logs = JSON.stringify(gw.logs.lines);
    expect(gw.logs.lines.length).toBeGreaterThan(0);
    for (const secret of [OPS, VIEWER, ...issuedKeys]) {
      for (const [where, text] of Object.entries({ metrics, audit, stream, logs }))
        expect(text.includes(secret), `${where} holds a secret`).toBe(false);
    }
  });
});
