// What an operator reads: store failures in /readyz and admin answers name the address and the
// problem in words (never the Redis client's text, never a password); the start line names the
// store and the upstreams; a reload that changed nothing is said and counted; /admin/config
// writes durations, rates and sizes as the file does.
import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { freePort } from "../support/ports.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const TOKEN = "operator-test-admin-token";
const PASSWORD = "s3cret-redis-password";
const UPSTREAM_PASSWORD = "upstream-basic-password";

const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${TOKEN} }
log: { level: info, requests: false }
store: { url: "${redisUrl}", timeout: 100ms, on_failure: open }
upstreams: { api: "${upstreamUrl}" }
clients: [{ id: c1, key: k1, plan: p }]
plans:
  p:
    global: { rate: 5/s, burst: 10 }
    routes:
      login: { algorithm: sliding_window, limit: 5, window: 15m }
      export: { algorithm: concurrency, max_in_flight: 2, lease: 90s }
      slow: { algorithm: leaky_bucket, rate: 30/m, queue: 3 }
routes:
  - { name: login, match: { path: /login }, upstream: api, on_failure: closed }
  - { name: export, match: { path: /export }, upstream: api, max_body: 1mb }
  - { name: slow, match: { path: /slow }, upstream: api, max_body: 1500b }
  - { name: default, match: { path: / }, upstream: api }
`;

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(async () => {
  await upstream?.close();
});

const admin = (gw: InProcessGateway, path: string, method = "GET") =>
  send(gw.adminUrl, { method, path, headers: { authorization: `Bearer ${TOKEN}` } });

/** No trace of the Redis client's own wording, nor of a password. */
function expectOperatorText(text: string): void {
  for (const raw of ["enableOfflineQueue", "Stream isn't writeable", "ECONNREFUSED", "ioredis", PASSWORD])
    expect(text).not.toContain(raw);
}

describe("Redis refusing connections", () => {
  let gw: InProcessGateway;
  let port: number;
  beforeAll(async () => {
    port = await freePort();
    gw = await startGateway(config(`redis://:${PASSWORD}@127.0.0.1:${port}`, upstream.url));
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it("/readyz names the address and the cause, without the password", async () => {
    const r = await send(gw.adminUrl, { path: "/readyz" });
    expect(r.status).toBe(503);
    expect(r.json<{ reason: string }>().reason).toBe(
      `limit store unreachable at 127.0.0.1:${port} (connection refused)`,
    );
    expectOperatorText(r.body);
  });

  it("an admin read or reset is a 503 with the same words", async () => {
    for (const [method, path] of [
      ["GET", "/admin/callers/client:c1"],
      ["DELETE", "/admin/callers/client:c1"],
      ["GET", "/admin/denials/top"],
    ] as const) {
      const r = await admin(gw, path, method);
      expect(r.status, `${method} ${path}: ${r.body}`).toBe(503);
      expect(r.headers["content-type"]).toBe("application/problem+json");
      expect(r.json()).toMatchObject({
        status: 503,
        title: "Service Unavailable",
        detail: `limit store unreachable at 127.0.0.1:${port} (connection refused)`,
      });
      expectOperatorText(r.body);
    }
  });

  it("the start line names the store's address and the upstreams, without credentials", async () => {
    const u = new URL(upstream.url);
    const withUser = `http://ops:${UPSTREAM_PASSWORD}@${u.host}/base`;
    const other = await startGateway(config(`redis://:${PASSWORD}@127.0.0.1:${port}`, withUser));
    try {
      const line = other.logs.lines.find((l) => l.msg === "tollgate listening")!;
      expect(line).toMatchObject({
        store: "redis",
        store_address: `127.0.0.1:${port}`,
        upstreams: { api: `http://${u.host}/base` },
      });
      const text = JSON.stringify(other.logs.lines);
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toContain(UPSTREAM_PASSWORD);
    } finally {
      await other.stop();
    }
  });
});

describe("Redis up, then paused, then asking for a password", () => {
  let redis: RedisProcess;
  let gw: InProcessGateway;
  beforeAll(async () => {
    redis = await startRedis();
    gw = await startGateway(config(redis.url, upstream.url));
  });
  afterAll(async () => {
    redis?.resume();
    await gw?.stop();
    await redis?.stop();
  });

  it("ready while Redis answers", async () => {
    expect((await send(gw.adminUrl, { path: "/readyz" })).status).toBe(200);
    expect((await admin(gw, "/admin/callers/client:c1")).status).toBe(200);
  });

  it("a hung Redis: /readyz and the admin API say it did not answer in time", async () => {
    redis.pause();
    try {
      const ready = await send(gw.adminUrl, { path: "/readyz" });
      expect(ready.status).toBe(503);
      expect(ready.json<{ reason: string }>().reason).toBe(
        `limit store at 127.0.0.1:${redis.port} did not answer within 250 ms`,
      );
      const r = await admin(gw, "/admin/callers/client:c1");
      expect(r.status).toBe(503);
      expect(r.json<{ detail: string }>().detail).toMatch(
        new RegExp(`^limit store at 127\\.0\\.0\\.1:${redis.port} did not answer (within \\d+ ms|in time)$`),
      );
    } finally {
      redis.resume();
    }
  });

  it("a Redis that now wants a password: authentication, in words", async () => {
    await redis.client.config("SET", "requirepass", PASSWORD);
    // Drop the gateway's connection: it reconnects without a password.
    await redis.client.call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
    let reason = "";
    for (let i = 0; i < 40 && !/authentication/.test(reason); i++) {
      await new Promise((r) => setTimeout(r, 100));
      reason = (await send(gw.adminUrl, { path: "/readyz" })).json<{ reason: string }>().reason ?? "";
    }
    expect(reason).toMatch(
      new RegExp(`^limit store (unreachable at|at) 127\\.0\\.0\\.1:${redis.port} .*authentication required`),
    );
    expectOperatorText(reason);
  });
});

describe("reloads that change nothing", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await startGateway(config("memory://", upstream.url));
  });
  afterAll(async () => {
    await gw?.stop();
  });
  const reloads = async () => {
    const text = (await send(gw.adminUrl, { path: "/metrics" })).body;
    const count = (result: string) =>
      Number(new RegExp(`tollgate_config_reloads_total\\{result="${result}"\\} (\\d+)`).exec(text)?.[1]);
    return { success: count("success"), unchanged: count("unchanged"), error: count("error") };
  };

  it("counts every result from the start, unchanged included", async () => {
    expect(await reloads()).toEqual({ success: 0, unchanged: 0, error: 0 });
  });

  it('SIGHUP on an unchanged file logs "config unchanged" and counts result="unchanged"', async () => {
    // What the CLI's SIGHUP handler does.
    const result = await gw.gateway.reload("signal");
    expect(result).toMatchObject({ ok: true, changed: false });
    const line = gw.logs.lines.find((l) => l.msg === "config unchanged");
    expect(line).toMatchObject({ trigger: "signal", config_version: gw.gateway.currentRuntime.version });
    expect(await reloads()).toEqual({ success: 0, unchanged: 1, error: 0 });
    const again = await admin(gw, "/admin/reload", "POST");
    expect(again.json()).toMatchObject({ status: "reloaded", changed: false });
    expect(await reloads()).toEqual({ success: 0, unchanged: 2, error: 0 });
  });

  it("a changed file is still a success", async () => {
    writeFileSync(gw.gateway.currentRuntime.file, `${config("memory://", upstream.url)}\n# edited\n`);
    expect(await gw.gateway.reload("signal")).toMatchObject({ ok: true, changed: true });
    expect((await reloads()).success).toBe(1);
  });
});

describe("GET /admin/config", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await startGateway(config("memory://", upstream.url));
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it("writes rates, windows, leases, sizes and timeouts as the file does", async () => {
    const r = await admin(gw, "/admin/config");
    expect(r.status).toBe(200);
    const body = r.json<{
      plans: Record<string, { global: unknown; routes: Record<string, unknown> }>;
      routes: { name: string; max_body: string | null }[];
      store: Record<string, unknown>;
    }>();
    expect(body.plans.p!.global).toEqual({ rate: "5/s", burst: 10 });
    expect(body.plans.p!.routes).toEqual({
      login: { algorithm: "sliding_window", limit: 5, window: "15m" },
      export: { algorithm: "concurrency", max_in_flight: 2, lease: "90s" },
      slow: { algorithm: "leaky_bucket", rate: "30/m", queue: 3 },
    });
    expect(Object.fromEntries(body.routes.map((route) => [route.name, route.max_body]))).toEqual({
      login: null,
      export: "1mb",
      slow: "1500b",
      default: null,
    });
    expect(body.store).toMatchObject({ kind: "memory", timeout: "100ms" });
    expect(r.body).not.toMatch(/periodMs|timeout_ms|900000/);
  });
});
