// The gateway in-process, against a real redis-server and a real upstream the test starts.
import { createHash } from "node:crypto";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: InProcessGateway;

const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: true }
store: { url: ${redisUrl}, prefix: "it:", timeout: 200ms }
upstreams:
  api: ${upstreamUrl}
  slow: { url: ${upstreamUrl}, timeout: 300ms }
  dead: http://127.0.0.1:1
identity:
  api_key: { header: x-api-key, bearer: true }
  trusted_proxies: [10.0.0.0/8]
clients:
  - { id: acme, key: acme-key, plan: free, tenant: acme }
  - { id: solo, key_sha256: "${sha("solo-key")}", plan: steady }
  - { id: blocked, key: blocked-key, plan: free }
  - { id: vip, key: vip-key, plan: free }
  - { id: streamer, key: streamer-key, plan: free }
plans:
  anonymous:
    global: { rate: 1/s, burst: 100 }
    routes:
      login: { rate: 1/m, burst: 3 }
  free:
    global: { rate: 5/s, burst: 10 }
    routes:
      login: { rate: 1/m, burst: 3 }
      expensive: { rate: 1/m, burst: 10 }
  # Refills one request every 6 s: twelve requests in a row see exactly ten admitted however
  # slow the machine is (5/s would refill while a loaded machine serves them).
  steady:
    global: { rate: 10/m, burst: 10 }
routes:
  - { name: login, match: { path: /login, methods: [POST] }, upstream: api, by: ip }
  - { name: expensive, match: { path: /v1/expensive }, upstream: api, cost: 5 }
  - { name: slow, match: { path: /slow }, upstream: slow }
  - { name: dead, match: { path: /dead }, upstream: dead }
  - { name: default, match: { path: /api }, upstream: api }
headers: [draft, ietf, legacy]
deny: { ips: [], clients: [blocked] }
exempt: { ips: [], clients: [vip] }
`;

function sha(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await startGateway(config(redis.url, upstream.url));
});
afterAll(async () => {
  await gw.stop();
  await upstream.close();
  await redis.stop();
});

const key = (k: string) => ({ "x-api-key": k });

describe("limits through the proxy", () => {
  it("sends the limit headers of every style on success", async () => {
    const r = await send(gw.url, { path: "/api/x", headers: key("acme-key") });
    expect(r.status).toBe(200);
    expect(r.headers["ratelimit-limit"]).toBe("10");
    expect(r.headers["ratelimit-remaining"]).toBe("9");
    expect(r.headers["ratelimit-reset"]).toMatch(/^\d+$/);
    expect(r.headers["ratelimit-policy"]).toBe('"free.global";q=10;w=2');
    expect(r.headers.ratelimit).toBe('"free.global";r=9;t=1');
    expect(Number(r.headers["x-ratelimit-reset"])).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
  });

  it("answers 429 with Retry-After and a problem body naming the limit; the upstream never sees it", async () => {
    const seen = () => upstream.received.filter((x) => x.headers["tollgate-client"] === "solo").length;
    const replies = [];
    for (let i = 0; i < 12; i++)
      replies.push(await send(gw.url, { path: "/api/y", headers: { authorization: "Bearer solo-key" } }));
    expect(replies.map((r) => r.status)).toEqual([...Array(10).fill(200), 429, 429]);
    expect(seen()).toBe(10);
    const denied = replies[10]!;
    expect(denied.headers["retry-after"]).toBe("6");
    expect(denied.headers["ratelimit-remaining"]).toBe("0");
    expect(denied.headers["content-type"]).toBe("application/problem+json");
    expect(denied.json()).toMatchObject({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Too Many Requests",
      status: 429,
      "violated-policies": ["steady.global"],
      retry_after_seconds: 6,
    });
    expect(denied.json<{ detail: string }>().detail).toContain("steady.global");
  });

  it("charges the route's cost and stores keys under the caller's hash tag with a TTL", async () => {
    const first = await send(gw.url, { path: "/v1/expensive", headers: key("acme-key") });
    expect(first.headers.ratelimit).toContain('"free.expensive";r=5');
    const keys = (await redis.client.keys("it:*")).sort();
    expect(keys).toEqual(
      expect.arrayContaining(["it:{t:acme}:c:acme:free.global", "it:{t:acme}:c:acme:free.expensive"]),
    );
    for (const k of keys) expect(await redis.client.pttl(k)).toBeGreaterThan(0);
  });

  it("treats every spelling of /login as the login route, keyed by IP", async () => {
    const spellings = ["/LOGIN", "//login", "/./login", "/x/../login", "/%6Cogin", "/login/"];
    const statuses = [];
    for (const path of spellings) statuses.push((await send(gw.url, { method: "POST", path })).status);
    // burst 3 per IP: the first three spellings pass, the rest are the same limit, denied.
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
    const paths = upstream.received.filter((r) => r.method === "POST").map((r) => r.url);
    expect(paths).toEqual(["/LOGIN", "/login", "/login"]);
  });

  it("ignores a forged X-Forwarded-For from an untrusted peer", async () => {
    const r = await send(gw.url, {
      method: "POST",
      path: "/login",
      headers: { "x-forwarded-for": "203.0.113.99" },
    });
    expect(r.status).toBe(429); // still 127.0.0.1's exhausted login bucket
    const ok = await send(gw.url, {
      path: "/api/xff",
      headers: { ...key("acme-key"), "x-forwarded-for": "203.0.113.99" },
    });
    expect(ok.status).toBe(200);
    const received = upstream.received.at(-1)!;
    expect(received.headers["x-forwarded-for"]).toBe("127.0.0.1");
  });

  it("lets exempt callers through without limits and refuses denied ones with 403", async () => {
    for (let i = 0; i < 15; i++)
      expect((await send(gw.url, { path: "/api/vip", headers: key("vip-key") })).status).toBe(200);
    const blocked = await send(gw.url, { path: "/api/x", headers: key("blocked-key") });
    expect(blocked.status).toBe(403);
    expect(blocked.headers["content-type"]).toBe("application/problem+json");
  });
});

describe("gateway errors are problem+json", () => {
  it.each([
    ["/api/%2F..%2Flogin", {}, 400],
    ["/nothing-here", {}, 404],
    ["/api/x", key("wrong-key"), 401],
    ["/api/x", { authorization: "Bearer wrong" }, 401],
    ["/api/x", { "x-api-key": ["acme-key", "solo-key"] }, 401],
  ] as const)("%s %j → %d", async (path, headers, status) => {
    const r = await send(gw.url, { path, headers: headers as Record<string, string> });
    expect(r.status).toBe(status);
    expect(r.headers["content-type"]).toBe("application/problem+json");
    expect(r.json()).toMatchObject({ status, title: expect.any(String), detail: expect.any(String) });
  });

  it("502 when the upstream refuses, 504 when it is too slow", async () => {
    const refused = await send(gw.url, { path: "/dead", headers: key("acme-key") });
    expect(refused.status).toBe(502);
    expect(refused.json<{ detail: string }>().detail).toContain('upstream "dead"');
    upstream.handle = (_req, res) => setTimeout(() => res.end("late"), 2500);
    const slow = await send(gw.url, { path: "/slow", headers: key("acme-key") });
    upstream.handle = null;
    expect(slow.status).toBe(504);
    // The 300 ms deadline is the gateway's own timer (exchange-deadline.ts); the bound leaves
    // room for a loaded machine.
    expect(slow.ms).toBeGreaterThanOrEqual(300);
    expect(slow.ms).toBeLessThan(1500);
    expect(slow.headers["content-type"]).toBe("application/problem+json");
  });

  it("502 when the upstream resets the connection, counted by upstream and reason", async () => {
    upstream.handle = (req) => req.socket.destroy();
    const reset = await send(gw.url, { path: "/api/reset", headers: key("acme-key") });
    upstream.handle = null;
    expect(reset.status).toBe(502);
    expect(reset.json<{ detail: string }>().detail).toContain("closed the connection");
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(metrics).toMatch(/tollgate_upstream_errors_total\{upstream="api",reason="reset"\} 1/);
    expect(metrics).toMatch(/tollgate_upstream_errors_total\{upstream="dead",reason="refused"\} 1/);
    expect(metrics).toMatch(/tollgate_upstream_errors_total\{upstream="slow",reason="timeout"\} 1/);
  });
});

describe("forwarding", () => {
  it("strips hop-by-hop headers both ways and sets the gateway's own", async () => {
    upstream.handle = (_req, res) => {
      res.writeHead(200, {
        connection: "x-up-private",
        "x-up-private": "1",
        "keep-alive": "timeout=77",
        "tollgate-cost": "3",
        "x-kept": "yes",
      });
      res.end("ok");
    };
    const r = await send(gw.url, {
      path: "/api/hop",
      headers: {
        ...key("acme-key"),
        connection: "x-secret",
        "x-secret": "1",
        te: "trailers",
        "proxy-authorization": "Basic Zm9v",
        "tollgate-client": "evil",
        "tollgate-plan": "enterprise",
        "x-request-id": "req-123",
      },
    });
    upstream.handle = null;
    const got = upstream.received.at(-1)!.headers;
    expect(got["x-secret"]).toBeUndefined();
    expect(got.te).toBeUndefined();
    expect(got["proxy-authorization"]).toBeUndefined();
    expect(got["tollgate-client"]).toBe("acme");
    expect(got["tollgate-tenant"]).toBe("acme");
    expect(got["tollgate-plan"]).toBe("free");
    expect(got.via).toBe("1.1 tollgate");
    expect(got["x-forwarded-proto"]).toBe("http");
    expect(got["x-forwarded-host"]).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(got["x-request-id"]).toBe("req-123");
    expect(r.headers["x-up-private"]).toBeUndefined();
    expect(r.headers["keep-alive"]).not.toBe("timeout=77");
    expect(r.headers["tollgate-cost"]).toBeUndefined();
    expect(r.headers["x-kept"]).toBe("yes");
    expect(r.headers["x-request-id"]).toBe("req-123");
  });

  it("streams request and response bodies", async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, "a");
    upstream.handle = (_req, res, body) => {
      res.writeHead(200, { "content-type": "text/plain" });
      // Chunked on the way back, in several writes.
      for (let i = 0; i < 4; i++) res.write(`${body.length}:${i};`);
      res.end();
    };
    // A client of its own: the tests before it spend acme's burst faster than it refills.
    const r = await send(gw.url, {
      method: "PUT",
      path: "/api/upload",
      headers: key("streamer-key"),
      body: big,
    });
    upstream.handle = null;
    expect(r.status).toBe(200);
    expect(r.body).toBe(`${big.length}:0;${big.length}:1;${big.length}:2;${big.length}:3;`);
  });

  it("cancels the upstream request when the client goes away", async () => {
    let upstreamSawClose = false;
    let arrived: () => void = () => {};
    const arrival = new Promise<void>((r) => {
      arrived = r;
    });
    upstream.handle = (req, res) => {
      res.writeHead(200);
      res.write("start");
      arrived();
      res.on("close", () => {
        upstreamSawClose = true;
      });
      void req;
    };
    const port = new URL(gw.url).port;
    const req = request({
      host: "127.0.0.1",
      port,
      path: "/api/hang",
      headers: key("streamer-key"),
      agent: false,
    });
    req.on("response", (res) => res.once("data", () => req.destroy()));
    req.on("error", () => {});
    req.end();
    await arrival;
    await new Promise((r) => setTimeout(r, 300));
    upstream.handle = null;
    expect(upstreamSawClose).toBe(true);
  });
});

describe("admin listener", () => {
  it("serves health, readiness and metrics", async () => {
    expect((await send(gw.adminUrl, { path: "/healthz" })).status).toBe(200);
    const ready = await send(gw.adminUrl, { path: "/readyz" });
    expect(ready.status).toBe(200);
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(metrics).toMatch(/tollgate_requests_total\{route="default",decision="allowed"\} \d+/);
    expect(metrics).toMatch(/tollgate_requests_total\{route="default",decision="limited"\} 2/);
    expect(metrics).toMatch(/tollgate_limit_check_duration_seconds_bucket\{le="0\.005"\} \d+/);
    expect(metrics).not.toMatch(/acme-key|solo-key|127\.0\.0\.1/);
    expect((await send(gw.adminUrl, { path: "/admin/callers/client:acme" })).status).toBe(404);
  });

  it("logs one line per request without credentials", () => {
    const requests = gw.logs.lines.filter((l) => l.msg === "request");
    expect(requests.length).toBeGreaterThan(20);
    expect(requests[0]).toMatchObject({
      request_id: expect.any(String),
      route: expect.any(String),
      decision: expect.any(String),
      status: expect.any(Number),
    });
    const all = JSON.stringify(gw.logs.lines);
    expect(all).not.toMatch(/acme-key|solo-key|vip-key|Zm9v/);
  });
});
