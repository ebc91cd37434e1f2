// Routing by host (issue 15): routes of one path on different hosts are different routes, each
// with its own budget, and a route without a host takes every other host. The gateway runs
// in-process against a real redis-server and a real upstream.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { rawRequest } from "../support/raw.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: InProcessGateway;

// Each route forwards under its own upstream base path, so the upstream sees which route served.
// A window of a minute: nothing refills while a test runs, however slow the machine.
const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
store: { url: ${redisUrl}, prefix: "hosts:", timeout: 500ms }
upstreams:
  api: ${upstreamUrl}/api
  eu: ${upstreamUrl}/eu
  any: ${upstreamUrl}/any
plans:
  anonymous:
    routes:
      api-search: { limit: 3, window: 1m }
      eu-search: { limit: 3, window: 1m }
      search: { limit: 3, window: 1m }
routes:
  - { name: search, match: { path: /v1/search }, upstream: any }
  - { name: api-search, match: { path: /v1/search, host: api.example.com }, upstream: api }
  - { name: eu-search, match: { path: /v1/search, host: "*.eu.example.com" }, upstream: eu }
headers: [ietf]
`;

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

async function burst(host: string, n: number) {
  const replies = [];
  for (let i = 0; i < n; i++) replies.push(await send(gw.url, { path: "/v1/search", headers: { host } }));
  return replies;
}

describe("routes by host", () => {
  it("gives two host routes on one path separate budgets, and the host-less route every other host", async () => {
    const api = await burst("api.example.com", 4);
    expect(api.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(api[0]!.headers["ratelimit-policy"]).toBe('"anonymous.api-search";q=3;w=60');
    expect(api[3]!.json()).toMatchObject({ "violated-policies": ["anonymous.api-search"] });

    // Another host on the same path: its own route, its own budget, untouched by api's.
    const eu = await burst("x.eu.example.com:8443", 4);
    expect(eu.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(eu[0]!.headers["ratelimit-policy"]).toBe('"anonymous.eu-search";q=3;w=60');

    // Any other host, and example.com itself (not below *.eu.example.com), go to the host-less route.
    const other = [...(await burst("other.test", 2)), ...(await burst("eu.example.com", 2))];
    expect(other.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(other[0]!.headers["ratelimit-policy"]).toBe('"anonymous.search";q=3;w=60');

    expect(upstream.received.map((r) => r.url)).toEqual([
      ...Array(3).fill("/api/v1/search"),
      ...Array(3).fill("/eu/v1/search"),
      ...Array(3).fill("/any/v1/search"),
    ]);
    // One limit state per route: the caller's key ends in the limit's name (limits/state-keys.ts).
    const limitKeys = (await redis.client.keys("hosts:*"))
      .map((k) => k.replace(/^.*:/, ""))
      .filter((name) => name.startsWith("anonymous."))
      .sort();
    expect(limitKeys).toEqual(["anonymous.api-search", "anonymous.eu-search", "anonymous.search"]);
  });

  it("reads the Host case-insensitively, without its port or trailing dot", async () => {
    // api.example.com's budget is spent above: every spelling of it is that route, denied.
    for (const host of ["API.Example.COM", "api.example.com.:80", "api.example.com:8080"]) {
      const r = await send(gw.url, { path: "/v1/search/x", headers: { host } });
      expect(r.status).toBe(429);
      expect(r.json()).toMatchObject({ "violated-policies": ["anonymous.api-search"] });
    }
  });

  it("refuses a Host an upstream would read as another host, and a target naming another host", async () => {
    // Each routed as some other host here, while an upstream reading X-Forwarded-Host (Express's
    // req.hostname, WHATWG URL) finds api.example.com in it: a way around that route's budget.
    const hosts = [
      "api.example.com,other.com",
      "user@api.example.com",
      "api%2eexample.com",
      "api.example.com/x",
      "api.example.com\\x",
      "api.example.com:abc",
      "api.example.com:99999",
      "api.example.com..",
      "a b",
    ];
    for (const host of hosts) {
      const r = await rawRequest(
        gw.url,
        `GET /v1/search HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
      expect([host, r.status]).toEqual([host, 400]);
      expect(r.text).toContain("application/problem+json");
    }
    const fullwidth = Buffer.concat([
      Buffer.from("GET /v1/search HTTP/1.1\r\nHost: "),
      Buffer.from("ａｐｉ.example.com", "utf8"),
      Buffer.from("\r\nConnection: close\r\n\r\n"),
    ]);
    expect((await rawRequest(gw.url, fullwidth)).status).toBe(400);
    // An absolute-form target is routed by Host only when both name the same host.
    const absolute = (target: string, host: string) =>
      rawRequest(gw.url, `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    expect((await absolute("http://api.example.com/v1/search", "other.com")).status).toBe(400);
    expect((await absolute("http://other.com/v1/search", "api.example.com")).status).toBe(400);
    expect((await rawRequest(gw.url, "GET http://api.example.com/v1/search HTTP/1.0\r\n\r\n")).status).toBe(
      400,
    );
    const same = await absolute("http://API.example.com:80/v1/search/y", "api.example.com");
    expect(same.status).not.toBe(400);
  });
});
