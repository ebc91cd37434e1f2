// Each algorithm through two gateway processes sharing one Redis: 200 concurrent requests admit
// exactly the limit, and a route limit combines with the global one all-or-nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, type SharedRedisSetup, startTwoInstances } from "../support/gateway.js";
import { send } from "../support/http.js";
import type { RedisProcess } from "../support/redis.js";
import type { TestUpstream } from "../support/upstream.js";

const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: ${redisUrl}, timeout: 500ms }
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: a, key: key-a, plan: p }
  - { id: b, key: key-b, plan: p }
  - { id: c, key: key-c, plan: p }
  - { id: d, key: key-d, plan: p }
  - { id: t1, key: key-t1, plan: team, tenant: acme }
  - { id: t2, key: key-t2, plan: team, tenant: acme }
  - { id: t3, key: key-t3, plan: team, tenant: other }
plans:
  p:
    global: { rate: 1/h, burst: 1000 }
    routes:
      sliding: { algorithm: sliding_window, limit: 7, window: 2s }
      fixed: { algorithm: fixed_window, limit: 11, window: 1h }
      counter: { algorithm: sliding_window_counter, limit: 9, window: 1h }
      bucket: { rate: 1/m, burst: 10 }
      costly: { rate: 1/m, burst: 10 }
      closed-door: { limit: 0 }
      llm: { rate: 1/h, burst: 20 }
      batched: { rate: 1/h, burst: 100, batch: 10 }
  team:
    global: { rate: 1/h, burst: 1000 }
    tenant: { rate: 1/h, burst: 30 }
routes:
  - { name: sliding, match: { path: /sliding }, upstream: api }
  - { name: fixed, match: { path: /fixed }, upstream: api }
  - { name: counter, match: { path: /counter }, upstream: api }
  - { name: bucket, match: { path: /bucket }, upstream: api }
  - { name: costly, match: { path: /costly }, upstream: api, cost: 4 }
  - { name: closed-door, match: { path: /closed-door }, upstream: api }
  - { name: llm, match: { path: /llm }, upstream: api }
  - { name: batched, match: { path: /batched }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

let setup: SharedRedisSetup;
let redis: RedisProcess;
let upstream: TestUpstream;
let a: GatewayProcess;
let b: GatewayProcess;

beforeAll(async () => {
  setup = await startTwoInstances(config);
  ({ redis, upstream, a, b } = setup);
});
afterAll(async () => {
  await setup?.stop();
});

const burst = async (path: string, key: string) => {
  const replies = await Promise.all(
    Array.from({ length: 200 }, (_, i) =>
      send(i % 2 ? b.url : a.url, { path, headers: { "x-api-key": key } }),
    ),
  );
  return replies;
};

describe("200 concurrent requests over two instances admit exactly the limit", () => {
  it("sliding_window 7 per 2 s, and 7 again 2 s later", async () => {
    const first = await burst("/sliding", "key-a");
    expect(first.filter((r) => r.status === 200)).toHaveLength(7);
    const denied = first.find((r) => r.status === 429)!;
    expect(denied.json()).toMatchObject({ "violated-policies": ["p.sliding"] });
    expect(Number(denied.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 2100));
    expect((await burst("/sliding", "key-a")).filter((r) => r.status === 200)).toHaveLength(7);
  });

  it("fixed_window 11 per 1 h", async () => {
    const replies = await burst("/fixed", "key-b");
    expect(replies.filter((r) => r.status === 200)).toHaveLength(11);
    expect(replies.find((r) => r.status === 200)!.headers["ratelimit-policy"]).toContain(
      '"p.fixed";q=11;w=3600',
    );
  });

  it("sliding_window_counter 9 per 1 h", async () => {
    expect((await burst("/counter", "key-a")).filter((r) => r.status === 200)).toHaveLength(9);
  });

  it("token bucket burst 10", async () => {
    expect((await burst("/bucket", "key-c")).filter((r) => r.status === 200)).toHaveLength(10);
  });

  it("a route limit and the global limit are decided together: the global limit is charged only for admitted requests", async () => {
    await burst("/sliding", "key-d"); // 7 admitted, 193 denied by p.sliding
    const r = await send(a.url, { path: "/other", headers: { "x-api-key": "key-d" } });
    // 1000 - 7 admitted - this one: the 193 denials took nothing from p.global.
    expect(r.headers.ratelimit).toContain('"p.global";r=992');
  });

  it("batch 10 against burst 100: never more than 100, at most 2 × 9 fewer, about a tenth of the script calls", async () => {
    const calls = async () =>
      Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redis.client.info("commandstats"))?.[1] ?? 0);
    const before = await calls();
    const replies = await burst("/batched", "key-b");
    const admitted = replies.filter((r) => r.status === 200).length;
    const used = (await calls()) - before;
    expect(admitted).toBeLessThanOrEqual(100);
    expect(admitted).toBeGreaterThanOrEqual(100 - 2 * 9);
    console.log(
      `[batch 10] 200 concurrent over two instances: ${admitted} of 100 admitted, ${used} script calls`,
    );
  });

  it("cost 4 against burst 10: exactly 2 admitted", async () => {
    const replies = await burst("/costly", "key-c");
    expect(replies.filter((r) => r.status === 200)).toHaveLength(2);
  });

  it("limit: 0 denies every request and consumes nothing", async () => {
    const globalLeft = async () =>
      Number(
        /"p\.global";r=(\d+)/.exec(
          String(
            (await send(a.url, { path: "/other", headers: { "x-api-key": "key-b" } })).headers.ratelimit,
          ),
        )?.[1],
      );
    const before = await globalLeft();
    const replies = await Promise.all(
      Array.from({ length: 20 }, () =>
        send(a.url, { path: "/closed-door", headers: { "x-api-key": "key-b" } }),
      ),
    );
    expect(replies.every((r) => r.status === 429)).toBe(true);
    expect(replies[0]!.json()).toMatchObject({ "violated-policies": ["p.closed-door"] });
    // Only the second probe itself was charged to p.global; the 20 denials took nothing.
    expect(await globalLeft()).toBe(before - 1);
  });

  it("a tenant limit of 30 is shared by two clients of one tenant; another tenant is unaffected", async () => {
    const replies = await Promise.all(
      Array.from({ length: 80 }, (_, i) =>
        send(i % 2 ? b.url : a.url, {
          path: "/t",
          headers: { "x-api-key": i % 4 < 2 ? "key-t1" : "key-t2" },
        }),
      ),
    );
    expect(replies.filter((r) => r.status === 200)).toHaveLength(30);
    expect(replies.find((r) => r.status === 429)!.json()).toMatchObject({
      "violated-policies": ["team.tenant"],
    });
    const other = await Promise.all(
      Array.from({ length: 10 }, () => send(a.url, { path: "/t", headers: { "x-api-key": "key-t3" } })),
    );
    expect(other.every((r) => r.status === 200)).toBe(true);
  });

  it("post-charge: a first request charged Tollgate-Cost: 15 against burst 20 leaves exactly 5", async () => {
    upstream.handle = (_req, res) => {
      res.writeHead(200, { "tollgate-cost": "15", "content-type": "text/plain" });
      // Body chunks may arrive while the debit is being committed: none may be lost.
      res.write("tokens:");
      setTimeout(() => res.end("15"), 20);
    };
    const first = await send(a.url, { path: "/llm", headers: { "x-api-key": "key-d" } });
    upstream.handle = null;
    expect(first.status).toBe(200);
    expect(first.body).toBe("tokens:15");
    expect(first.headers["tollgate-cost"]).toBeUndefined();
    // Its own headers already show what is left after the real cost, not before it.
    expect(first.headers.ratelimit).toContain('"p.llm";r=5');
    // 20 - 15 = 5 left: the next request (cost 1, no post-charge) leaves 4, on the other instance.
    const next = await send(b.url, { path: "/llm", headers: { "x-api-key": "key-d" } });
    expect(next.headers.ratelimit).toContain('"p.llm";r=4');
  });

  it("keys carry the caller's hash tag and a TTL", async () => {
    const keys = await redis.client.keys("tollgate:*");
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) {
      // Besides the limits: the runtime change feed's epoch (a reconcile may have run), which
      // expires like every other key.
      expect(k).toMatch(
        /^tollgate:(\{c:[abcd]\}:(p\.(global|sliding|fixed|counter|bucket|costly|llm|batched)|denials)|\{t:(acme|other)\}:(c:t[123]:(team\.global|denials)|team\.tenant)|\{denials\}:top:\d+|\{rt\}:epoch)$/,
      );
      expect(await redis.client.pttl(k)).toBeGreaterThan(0);
    }
  });
});
