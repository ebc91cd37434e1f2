// Several limits on one plan route: `plans.<plan>.routes.<route>` holds a map of named limits
// ("10/s and 3 a day per caller on /search for the free plan"), each named
// `<plan>.<route>.<name>` and all decided in the one check, beside the single-limit form, which
// keeps its name. Each shows in the RateLimit headers, the 429 body, the admin API and takes an
// override by its name. Before, the map form was refused ("unknown key per-second").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const TOKEN = "admin-token-for-plan-route-limit-tests";
let redis: RedisProcess;
let upstream: TestUpstream;
let gw: InProcessGateway;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await startGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${TOKEN} }
log: { level: warn, requests: false }
store: { url: ${redis.url}, prefix: "prl:" }
upstreams: { api: ${upstream.url} }
headers: [ietf, draft]
clients:
  - { id: a, key: key-a, plan: free }
  - { id: b, key: key-b, plan: free }
  - { id: c, key: key-c, plan: free, limits: { routes: { search: { daily: { algorithm: fixed_window, limit: 1, window: 1d } } } } }
plans:
  free:
    routes:
      search:
        per-second: { rate: 1/m, burst: 5 }
        daily: { algorithm: fixed_window, limit: 3, window: 1d }
      single: { rate: 1/m, burst: 2 }
routes:
  - { name: search, match: { path: /search }, upstream: api }
  - { name: single, match: { path: /single }, upstream: api }
`);
});
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

const auth = { authorization: `Bearer ${TOKEN}` };
const get = (key: string, path = "/search") => send(gw.url, { path, headers: { "x-api-key": key } });

describe("a plan route with named limits", () => {
  it("decides both in one check, names each, and the tighter denies", async () => {
    const first = await get("key-a");
    expect(first.status).toBe(200);
    const policy = String(first.headers["ratelimit-policy"]);
    expect(policy).toContain('"free.search.per-second"');
    expect(policy).toContain('"free.search.daily"');
    await get("key-a");
    await get("key-a");
    const fourth = await get("key-a");
    expect(fourth.status).toBe(429);
    const problem = fourth.json();
    expect(problem["violated-policies"]).toEqual(["free.search.daily"]);
    expect(problem.detail).toContain("free.search.daily");
    // Nothing of the other limit was consumed by the denied request: 5 − 3 left.
    const view = await send(gw.adminUrl, { path: "/admin/callers/client:a", headers: auth });
    expect(view.status).toBe(200);
    const limits = view.json().limits as { name: string; remaining?: number }[];
    const names = limits.map((l) => l.name);
    expect(names).toContain("free.search.per-second");
    expect(names).toContain("free.search.daily");
  });

  it("keeps the single form and its name", async () => {
    const reply = await get("key-a", "/single");
    expect(reply.status).toBe(200);
    expect(String(reply.headers["ratelimit-policy"])).toContain('"free.single"');
  });

  it("takes an override by the limit's full name", async () => {
    for (let i = 0; i < 3; i++) expect((await get("key-b")).status).toBe(200);
    expect((await get("key-b")).status).toBe(429);
    const put = await send(gw.adminUrl, {
      path: "/admin/overrides/client:b/free.search.daily",
      method: "PUT",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ limit: 4, expires_in: "1h", reason: "trial" }),
    });
    expect(put.status).toBe(201);
    expect(put.json().limit).toBe(4);
    await new Promise((r) => setTimeout(r, 200));
    expect((await get("key-b")).status).toBe(200);
    expect((await get("key-b")).status).toBe(429);
  });

  it("lets a client size one named limit and keeps the plan's other", async () => {
    expect((await get("key-c")).status).toBe(200);
    const second = await get("key-c");
    expect(second.status).toBe(429);
    expect(second.json()["violated-policies"]).toEqual(["free.search.daily"]);
  });
});
