// What an operator sees, against real Redis through the CLI: who is limited and why (admin API
// read from the limiter's own keys), metrics, readiness when Redis dies, sustained denials and
// shadow limits.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, metricValue, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const TOKEN = "admin-token-for-tests";
// The acceptance run uses 60 (and hammers for 70 s): SUSTAINED_DENIAL_SECONDS=60.
const SUSTAINED_S = Number(process.env.SUSTAINED_DENIAL_SECONDS ?? 3);
const HAMMER_S = SUSTAINED_S + (SUSTAINED_S >= 60 ? 10 : 3);

const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${TOKEN} }
log: { level: info, requests: false }
store: { url: ${redisUrl}, timeout: 200ms, on_failure: closed, breaker: { error_rate: 50%, min_requests: 5, window: 2s, cooldown: 30s } }
sustained_denial: ${SUSTAINED_S}s
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: client-x, key: key-x-secret, plan: small }
  - { id: hammer, key: key-hammer-secret, plan: small }
  - { id: trial, key: key-trial-secret, plan: trial, tenant: acme }
plans:
  small: { global: { rate: 1/h, burst: 3 } }
  trial:
    global: { rate: 1/h, burst: 1000 }
    tenant: { rate: 1/h, burst: 500 }
    routes:
      search: { rate: 1/h, burst: 3, shadow: true }
routes:
  - { name: search, match: { path: /search }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: GatewayProcess;
const admin = (path: string, method = "GET") =>
  send(gw.adminUrl, { path, method, headers: { authorization: `Bearer ${TOKEN}` } });
const metric = (pattern: RegExp) => metricValue(gw.adminUrl, pattern);

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await spawnGateway(config(redis.url, upstream.url));
}, 30_000);
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

describe("who is limited and why", () => {
  it("10 requests on burst 3: remaining 0 and 7 recent denials, read twice without consuming; top list; reset", async () => {
    const statuses = [];
    for (let i = 0; i < 10; i++) {
      statuses.push(
        (await send(gw.url, { path: "/orders", headers: { "x-api-key": "key-x-secret" } })).status,
      );
    }
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);

    const first = (await admin("/admin/callers/client:client-x")).json<{
      limits: { name: string; limit: number; remaining: number; reset_seconds: number }[];
      recent_denials: { time: string; route: string; limits: string[] }[];
    }>();
    expect(first.limits).toEqual([expect.objectContaining({ name: "small.global", limit: 3, remaining: 0 })]);
    expect(first.limits[0]!.reset_seconds).toBeGreaterThan(0);
    expect(first.recent_denials).toHaveLength(7);
    expect(first.recent_denials[0]).toMatchObject({ route: "default", limits: ["small.global"] });
    const second = (await admin("/admin/callers/client:client-x")).json<typeof first>();
    expect(second.limits[0]!.remaining).toBe(0);

    const top = (await admin("/admin/denials/top?n=5")).json<{
      callers: { caller: string; denials: number }[];
    }>();
    expect(top.callers[0]).toEqual({ caller: "client:client-x", denials: 7 });

    expect((await admin("/admin/callers/client:client-x", "DELETE")).status).toBe(200);
    const after = (await admin("/admin/callers/client:client-x")).json<typeof first>();
    expect(after.limits[0]!.remaining).toBe(3);
    expect(after.recent_denials).toHaveLength(0);
    const next = await send(gw.url, { path: "/orders", headers: { "x-api-key": "key-x-secret" } });
    expect(next.status).toBe(200);
    expect(next.headers["ratelimit-remaining"]).toBe("2");
  });

  it("names a caller precisely or says why not", async () => {
    expect((await admin("/admin/callers/nobody")).status).toBe(400);
    expect((await admin("/admin/callers/client:ghost")).status).toBe(404);
    expect((await admin("/admin/callers/ip:not-an-ip")).status).toBe(400);
    const tenant = (await admin("/admin/callers/tenant:acme")).json<{ limits: { name: string }[] }>();
    expect(tenant.limits.map((l) => l.name)).toEqual(["trial.tenant"]);
    expect((await send(gw.adminUrl, { path: "/admin/callers/client:client-x" })).status).toBe(401);
  });

  it("/admin/config shows version, load time, routes and plans, and no secret", async () => {
    const r = await admin("/admin/config");
    const body = r.json<{
      version: string;
      loaded_at: string;
      routes: unknown[];
      plans: Record<string, unknown>;
    }>();
    expect(body.version).toMatch(/^[0-9a-f]{64}$/);
    expect(Date.parse(body.loaded_at)).not.toBeNaN();
    expect(body.routes).toHaveLength(2);
    expect(Object.keys(body.plans)).toEqual(["small", "trial"]);
    for (const secret of ["key-x-secret", "key-hammer-secret", TOKEN]) expect(r.body).not.toContain(secret);
  });
});

describe("metrics", () => {
  it("a shadow limit of 3 lets 10 requests through and counts 7 shadow_limited", async () => {
    const statuses = [];
    for (let i = 0; i < 10; i++) {
      const r = await send(gw.url, { path: "/search", headers: { "x-api-key": "key-trial-secret" } });
      statuses.push(r.status);
      // Clients never see a shadow limit in their headers.
      expect(String(r.headers["ratelimit-policy"])).not.toContain("trial.search");
    }
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(await metric(/tollgate_requests_total\{route="search",decision="shadow_limited"\} (\d+)/)).toBe(7);
    expect(await metric(/tollgate_requests_total\{route="search",decision="allowed"\} (\d+)/)).toBe(3);
  });

  it("exports every family of SPEC §4, and no tollgate_ label carries a client id, key or IP", async () => {
    const text = (await send(gw.adminUrl, { path: "/metrics" })).body;
    for (const family of [
      "tollgate_requests_total",
      "tollgate_limit_check_duration_seconds",
      "tollgate_store_errors_total",
      "tollgate_breaker_state",
      "tollgate_upstream_duration_seconds",
      "tollgate_config_reloads_total",
      "tollgate_sustained_denials",
      "tollgate_upstream_errors_total",
      "tollgate_near_limit_total",
      "tollgate_process_resident_memory_bytes",
      "tollgate_nodejs_eventloop_lag_p99_seconds",
    ]) {
      expect(text, family).toContain(`# TYPE ${family} `);
    }
    expect(text).toMatch(/tollgate_requests_total\{route="default",decision="limited"\} \d+/);
    const labelValues = [...text.matchAll(/^tollgate_[^{\s]*\{([^}]*)\}/gm)].flatMap((m) =>
      [...m[1]!.matchAll(/="([^"]*)"/g)].map((v) => v[1]!),
    );
    for (const value of labelValues) {
      expect(value).not.toMatch(/client-x|hammer|trial|key-|127\.0\.0\.1|acme/);
    }
  });
});

describe("sustained denials", () => {
  it(
    `a client hammering past its limit for ${HAMMER_S} s with sustained_denial ${SUSTAINED_S}s: one log line, gauge 1, then 0`,
    async () => {
      const until = Date.now() + HAMMER_S * 1000;
      let denied = 0;
      while (Date.now() < until) {
        const r = await send(gw.url, { path: "/x", headers: { "x-api-key": "key-hammer-secret" } }).catch(
          (err) => {
            throw new Error(`${err}: ${gw.stderr.join("")}`);
          },
        );
        if (r.status === 429) denied++;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(denied).toBeGreaterThan(50);
      const lines = gw.lines.filter((l) => String(l.msg).startsWith("caller denied without pause"));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ caller: "client:hammer" });
      expect(await metric(/^tollgate_sustained_denials (\d+)/m)).toBe(1);
      // The admin API names it (the console's Now page), since when.
      const named = await send(gw.adminUrl, {
        path: "/admin/denials/sustained",
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(named.json<{ callers: { caller: string; denied_since: string }[] }>().callers).toEqual([
        { caller: "client:hammer", denied_since: expect.any(String), last_denied: expect.any(String) },
      ]);
      // Once it stops (no denial for the pause of 5 s), the gauge drops back.
      await new Promise((resolve) => setTimeout(resolve, 6500));
      expect(await metric(/^tollgate_sustained_denials (\d+)/m)).toBe(0);
      const after = await send(gw.adminUrl, {
        path: "/admin/denials/sustained",
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(after.json<{ callers: unknown[] }>().callers).toEqual([]);
    },
    (HAMMER_S + 20) * 1000,
  );
});

describe("Redis killed, on_failure: closed", () => {
  it("/readyz 503 with a reason, breaker open, store errors counted, /healthz still 200", async () => {
    await redis.kill();
    // Let the breaker's 2 s window forget the successes of the cases above.
    await new Promise((resolve) => setTimeout(resolve, 2100));
    for (let i = 0; i < 10; i++) {
      const r = await send(gw.url, { path: "/x", headers: { "x-api-key": "key-trial-secret" } });
      expect(r.status).toBe(503);
    }
    const ready = await send(gw.adminUrl, { path: "/readyz" });
    expect(ready.status).toBe(503);
    expect(ready.json<{ reason: string }>().reason).toContain("limit store");
    expect(await metric(/^tollgate_breaker_state (\d+)/m)).toBe(2);
    const errors = await metric(/tollgate_store_errors_total\{reason="connection"\} (\d+)/);
    const open = await metric(/tollgate_store_errors_total\{reason="breaker_open"\} (\d+)/);
    expect(errors + open).toBeGreaterThanOrEqual(10);
    expect((await send(gw.adminUrl, { path: "/healthz" })).status).toBe(200);
  });
});
