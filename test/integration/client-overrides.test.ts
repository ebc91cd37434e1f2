// clients[].limits through a real gateway and Redis: a client's own size of a plan limit is the
// one enforced for it (and only for it), stated in its RateLimit headers under the plan's limit
// name, and shown by the admin API.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const TOKEN = "admin-token-for-override-tests";

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: InProcessGateway;

// Rates of one per minute: nothing refills while a test runs, however slow the machine.
const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${TOKEN} }
log: { level: warn, requests: false }
store: { url: ${redisUrl}, prefix: "ov:" }
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: big, key: big-key, plan: pro, limits: { global: { rate: 1/m, burst: 5 } } }
  - { id: small, key: small-key, plan: pro }
  - id: wide
    key: wide-key
    plan: team
    tenant: acme
    limits: { routes: { search: { algorithm: fixed_window, limit: 3, window: 1h } } }
  - { id: plain, key: plain-key, plan: team, tenant: acme }
plans:
  pro:
    global: { rate: 1/m, burst: 2 }
  team:
    global: { rate: 1/m, burst: 10 }
    routes:
      search: { algorithm: sliding_window, limit: 1, window: 1h }
routes:
  - { name: search, match: { path: /search }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await startGateway(config(redis.url, upstream.url));
});
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

/** `n` requests at once with this key; the replies in the order they were sent. */
const burst = (key: string, path: string, n: number) =>
  Promise.all(Array.from({ length: n }, () => send(gw.url, { path, headers: { "x-api-key": key } })));

const admin = (path: string) => send(gw.adminUrl, { path, headers: { authorization: `Bearer ${TOKEN}` } });

describe("a client's override of its plan's global limit", () => {
  it("admits exactly the override for that client and exactly the plan for another", async () => {
    const [big, small] = await Promise.all([burst("big-key", "/x", 9), burst("small-key", "/x", 9)]);
    expect(big.filter((r) => r.status === 200)).toHaveLength(5);
    expect(big.filter((r) => r.status === 429)).toHaveLength(4);
    expect(small.filter((r) => r.status === 200)).toHaveLength(2);
    expect(small.filter((r) => r.status === 429)).toHaveLength(7);
  });

  it("states the override's quota under the plan's limit name, in its usual key", async () => {
    const big = (await burst("big-key", "/x", 1))[0]!;
    expect(big.headers["ratelimit-limit"]).toBe("5");
    expect(big.headers["ratelimit-policy"]).toBe('"pro.global";q=5;w=300');
    const small = (await burst("small-key", "/x", 1))[0]!;
    expect(small.headers["ratelimit-limit"]).toBe("2");
    expect(small.headers["ratelimit-policy"]).toBe('"pro.global";q=2;w=120');
    expect(await redis.client.exists("ov:{c:big}:pro.global")).toBe(1);
    expect(await redis.client.exists("ov:{c:small}:pro.global")).toBe(1);
  });
});

describe("a client's override of its plan's route limit", () => {
  it("applies the override's algorithm and size to that client only", async () => {
    const [wide, plain] = await Promise.all([
      burst("wide-key", "/search", 6),
      burst("plain-key", "/search", 6),
    ]);
    expect(wide.filter((r) => r.status === 200)).toHaveLength(3);
    expect(plain.filter((r) => r.status === 200)).toHaveLength(1);
    // The plan's global limit is untouched: the client keeps its plan's size of it.
    expect(wide[0]!.headers["ratelimit-policy"]).toBe('"team.global";q=10;w=600, "team.search";q=3;w=3600');
    expect(plain[0]!.headers["ratelimit-policy"]).toBe('"team.global";q=10;w=600, "team.search";q=1;w=3600');
    expect(await redis.client.exists("ov:{t:acme}:c:wide:team.search")).toBe(1);
  });
});

describe("the admin API", () => {
  it("shows a client's limits as they apply to it, overrides marked", async () => {
    const big = (await admin("/admin/callers/client:big")).json() as {
      plan: string;
      limits: { name: string; limit: number; override?: boolean; key: string }[];
    };
    expect(big.plan).toBe("pro");
    expect(big.limits).toEqual([
      expect.objectContaining({ name: "pro.global", limit: 5, override: true, key: "ov:{c:big}:pro.global" }),
    ]);
    const wide = (await admin("/admin/callers/client:wide")).json() as typeof big;
    expect(wide.limits.map((l) => [l.name, l.limit, l.override ?? false])).toEqual([
      ["team.global", 10, false],
      ["team.search", 3, true],
    ]);
    const plain = (await admin("/admin/callers/client:plain")).json() as typeof big;
    expect(plain.limits.map((l) => [l.name, l.limit, "override" in l])).toEqual([
      ["team.global", 10, false],
      ["team.search", 1, false],
    ]);
  });

  it("shows the overrides in /admin/config, in the file's notation and without keys", async () => {
    const r = await admin("/admin/config");
    expect(r.status).toBe(200);
    const body = r.json() as { clients: unknown[] };
    expect(body.clients).toEqual([
      { id: "big", plan: "pro", tenant: null, limits: { global: { rate: "1/m", burst: 5 }, routes: {} } },
      { id: "small", plan: "pro", tenant: null },
      {
        id: "wide",
        plan: "team",
        tenant: "acme",
        limits: { routes: { search: { algorithm: "fixed_window", limit: 3, window: "1h" } } },
      },
      { id: "plain", plan: "team", tenant: "acme" },
    ]);
    for (const secret of ["big-key", "small-key", "wide-key", "plain-key"])
      expect(r.body).not.toContain(secret);
  });
});
