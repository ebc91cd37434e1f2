// Route budgets, keyed limits, client overrides and host routes through two gateway processes
// sharing one Redis: the built CLI, as operators run it. Every limit here is a token bucket
// refilling once an hour, so the counts are exact whatever the machine's speed; requests are
// concurrent and spread over both instances.
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, type SharedRedisSetup, startTwoInstances } from "../support/gateway.js";
import { type Reply, send } from "../support/http.js";

const SECRET = "e2e-keyed-limits-secret-e2e-keyed-limits";

const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: ${redisUrl}, timeout: 500ms, on_failure: closed }
upstreams: { api: ${upstreamUrl} }
identity:
  api_key: { header: x-api-key, bearer: false }
  jwt: { secret: ${SECRET}, default_plan: free }
clients:
  - { id: c0, key: key-0, plan: free }
  - { id: c1, key: key-1, plan: free }
  - { id: c2, key: key-2, plan: free }
  - { id: c3, key: key-3, plan: free }
  - { id: big, key: key-big, plan: free, limits: { global: { rate: 1/h, burst: 500 } } }
plans:
  anonymous: {}
  free:
    global: { rate: 1/h, burst: 100 }
    routes:
      reports: { rate: 1/h, burst: 3, by: "segment:3" }
      claims: { rate: 1/h, burst: 3, by: "claim:org" }
      models: { rate: 1/h, burst: 3, by: [caller, "header:x-model"] }
routes:
  - name: search
    match: { path: /v1/search }
    upstream: api
    limits: { total: { rate: 1/h, burst: 10 } }
  - name: orgs
    match: { path: /v1/orgs }
    upstream: api
    limits: { per-org: { rate: 1/h, burst: 3, by: "header:x-org-id" } }
  - { name: reports, match: { path: /v1/reports }, upstream: api }
  - { name: claims, match: { path: /v1/claims }, upstream: api }
  - { name: models, match: { path: /v1/models }, upstream: api }
  - name: hosted-a
    match: { path: /v1/hosted, host: a.example.com }
    upstream: api
    limits: { total: { rate: 1/h, burst: 2 } }
  - name: hosted-b
    match: { path: /v1/hosted, host: "*.b.example.com" }
    upstream: api
    limits: { total: { rate: 1/h, burst: 2 } }
  - name: hosted
    match: { path: /v1/hosted }
    upstream: api
    limits: { total: { rate: 1/h, burst: 2 } }
  - { name: default, match: { path: / }, upstream: api }
`;

let setup: SharedRedisSetup;
let a: GatewayProcess;
let b: GatewayProcess;

beforeAll(async () => {
  setup = await startTwoInstances(config);
  ({ a, b } = setup);
});
afterAll(async () => {
  await setup?.stop();
});

const via = (i: number) => (i % 2 ? b : a);
const get = (i: number, path: string, headers: Record<string, string | string[]> = {}) =>
  send(via(i).url, { path, headers });
const apiKey = (key: string) => ({ "x-api-key": key });
const bearer = async (claims: Record<string, unknown>) => ({
  authorization: `Bearer ${await new SignJWT({ exp: Math.floor(Date.now() / 1000) + 300, ...claims })
    .setProtectedHeader({ alg: "HS256" })
    .sign(Buffer.from(SECRET))}`,
});

/** 200s per label; every reply must be a 200 or a 429 naming `limit`. */
function admitted(replies: Reply[], label: (i: number) => string, limit: string): Record<string, number> {
  const counts: Record<string, number> = {};
  replies.forEach((r, i) => {
    counts[label(i)] ??= 0;
    if (r.status === 200) counts[label(i)]!++;
    else {
      expect(r.status, r.body).toBe(429);
      expect(r.json()["violated-policies"]).toEqual([limit]);
    }
  });
  return counts;
}

describe("route budgets and keyed limits across two instances", () => {
  it("a route budget of 10 shared by API-key clients and anonymous callers admits exactly 10 of 40", async () => {
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) => get(i, "/v1/search", i % 5 === 4 ? {} : apiKey(`key-${i % 4}`))),
    );
    expect(admitted(replies, () => "all", "search.total")).toEqual({ all: 10 });
    // Both kinds of caller reached it, and both instances answered: one budget for all.
    expect(replies.filter((r, i) => r.status === 429 && i % 5 === 4).length).toBeGreaterThan(0);
    const left = replies.filter((r) => r.status === 200).map((r) => Number(r.headers["ratelimit-remaining"]));
    expect(left.sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("header, segment, claim and [caller, header:x-model] keys each admit exactly 3 per value", async () => {
    const tokens = await Promise.all(
      Array.from({ length: 4 }, (_, i) => bearer({ sub: `user-${i}`, org: i % 2 ? "o-2" : "o-1" })),
    );
    const models: [string, string][] = [
      ["key-0", "m1"],
      ["key-0", "m2"],
      ["key-1", "m1"],
    ];
    const [orgs, reports, claims, composite] = await Promise.all([
      Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          get(i, "/v1/orgs", { ...apiKey(`key-${i % 4}`), "x-org-id": i % 2 ? "org-b" : "org-a" }),
        ),
      ),
      Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          get(i, i % 2 ? "/v1/reports/r-2/pdf" : "/v1/reports/r-1", apiKey(`key-${i % 4}`)),
        ),
      ),
      Promise.all(Array.from({ length: 12 }, (_, i) => get(i, "/v1/claims", tokens[i % 4]!))),
      Promise.all(
        Array.from({ length: 18 }, (_, i) => {
          const [key, model] = models[i % 3]!;
          return get(i, "/v1/models", { ...apiKey(key), "x-model": model });
        }),
      ),
    ]);
    expect(admitted(orgs, (i) => (i % 2 ? "org-b" : "org-a"), "orgs.per-org")).toEqual({
      "org-a": 3,
      "org-b": 3,
    });
    expect(admitted(reports, (i) => (i % 2 ? "r-2" : "r-1"), "free.reports")).toEqual({ "r-1": 3, "r-2": 3 });
    expect(admitted(claims, (i) => (i % 2 ? "o-2" : "o-1"), "free.claims")).toEqual({ "o-1": 3, "o-2": 3 });
    expect(admitted(composite, (i) => models[i % 3]!.join("/"), "free.models")).toEqual({
      "key-0/m1": 3,
      "key-0/m2": 3,
      "key-1/m1": 3,
    });
  });

  it("a client override shows in RateLimit-Limit; the limit keeps the plan's name", async () => {
    const [big, plain] = await Promise.all([
      get(0, "/v1/x", apiKey("key-big")),
      get(1, "/v1/x", apiKey("key-3")),
    ]);
    expect(big.status).toBe(200);
    expect(big.headers["ratelimit-limit"]).toBe("500");
    expect(big.headers["ratelimit-remaining"]).toBe("499");
    expect(big.headers["ratelimit-policy"]).toContain('"free.global";q=500');
    expect(plain.headers["ratelimit-limit"]).toBe("100");
  });

  it("two routes on one path with different hosts keep their own budgets", async () => {
    const hosts = ["a.example.com", "api.b.example.com:8080", "other.example.com"];
    const names = ["hosted-a.total", "hosted-b.total", "hosted.total"];
    const replies = await Promise.all(
      Array.from({ length: 18 }, (_, i) => get(i, "/v1/hosted", { ...apiKey("key-2"), host: hosts[i % 3]! })),
    );
    const counts: Record<string, number> = {};
    replies.forEach((r, i) => {
      counts[names[i % 3]!] = (counts[names[i % 3]!] ?? 0) + (r.status === 200 ? 1 : 0);
      if (r.status !== 200) expect(r.json()["violated-policies"]).toEqual([names[i % 3]]);
    });
    expect(counts).toEqual({ "hosted-a.total": 2, "hosted-b.total": 2, "hosted.total": 2 });
  });

  it("a keyed header sent twice is a 400 problem, and takes nothing", async () => {
    const twice = await get(0, "/v1/orgs", { ...apiKey("key-2"), "x-org-id": ["org-c", "org-d"] });
    expect(twice.status).toBe(400);
    expect(twice.headers["content-type"]).toContain("application/problem+json");
    expect(twice.json()).toMatchObject({ status: 400 });
    expect(twice.json<{ detail: string }>().detail).toContain("x-org-id");
    const once = await get(1, "/v1/orgs", { ...apiKey("key-2"), "x-org-id": "org-c" });
    expect(once.headers["ratelimit-remaining"]).toBe("2");
  });
});
