// The two algorithms that shape traffic rather than count it, through gateway processes sharing
// one Redis: a leaky bucket delays forwarding to its slot, a concurrency limit holds a lease per
// request in flight and gives it back however the request ends.
import type { ServerResponse } from "node:http";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type GatewayProcess,
  type SharedRedisSetup,
  spawnGateway,
  startTwoInstances,
} from "../support/gateway.js";
import { send } from "../support/http.js";
import type { TestUpstream } from "../support/upstream.js";

const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: true }
store: { url: ${redisUrl}, timeout: 500ms }
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: q1, key: key-q1, plan: p }
  - { id: q2, key: key-q2, plan: p }
  - { id: s1, key: key-s1, plan: p }
  - { id: s2, key: key-s2, plan: p }
  - { id: s3, key: key-s3, plan: p }
  - { id: s4, key: key-s4, plan: p }
plans:
  p:
    global: { rate: 1/h, burst: 1000 }
    routes:
      queue: { algorithm: leaky_bucket, rate: 5/s, queue: 3 }
      slots: { algorithm: concurrency, max_in_flight: 2, lease: 1s }
routes:
  - { name: queue, match: { path: /queue }, upstream: api }
  - { name: slots, match: { path: /slots }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

let setup: SharedRedisSetup;
let upstream: TestUpstream;
let a: GatewayProcess;
let b: GatewayProcess;
/** When each request reached the upstream (ms, this process's clock), by path. */
const arrivals: { path: string; at: number }[] = [];
/** Responses the upstream holds open until the test lets them go. */
const held: ServerResponse[] = [];

beforeAll(async () => {
  setup = await startTwoInstances(config);
  ({ upstream, a, b } = setup);
  upstream.handle = (req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    arrivals.push({ path: url.pathname, at: performance.now() });
    const mode = url.searchParams.get("mode");
    if (mode === "hold") {
      held.push(res);
      return;
    }
    if (mode === "fail") {
      res.socket?.destroy();
      return;
    }
    setTimeout(() => res.end("ok"), Number(url.searchParams.get("ms") ?? 0));
  };
}, 30_000);
afterAll(async () => {
  for (const res of held) res.end();
  await setup?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const as = (key: string) => ({ "x-api-key": key });

describe("leaky bucket: rate 5/s, queue 3", () => {
  it("of 8 simultaneous requests, 4 reach the upstream ~200 ms apart and 4 get 429", async () => {
    const before = arrivals.length;
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        send(i % 2 ? b.url : a.url, { path: "/queue/a", headers: as("key-q1") }),
      ),
    );
    expect(replies.filter((r) => r.status === 200)).toHaveLength(4);
    const denied = replies.filter((r) => r.status === 429);
    expect(denied).toHaveLength(4);
    expect(denied[0]!.json()).toMatchObject({ "violated-policies": ["p.queue"] });
    expect(Number(denied[0]!.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    const times = arrivals.slice(before).map((x) => x.at);
    expect(times).toHaveLength(4);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    for (const gap of gaps) {
      expect(gap).toBeGreaterThan(150);
      expect(gap).toBeLessThan(280);
    }
  });

  it("a client that leaves while queued is never forwarded", async () => {
    await sleep(1000); // the queue of the case above has drained
    const before = arrivals.length;
    const first = send(a.url, { path: "/queue/b", headers: as("key-q2") });
    const second = send(b.url, { path: "/queue/b", headers: as("key-q2") });
    // The third is queued ~400 ms behind; it hangs up after 100 ms.
    const third = new Promise<string>((resolve) => {
      const req = request(`${a.url}/queue/b`, { headers: as("key-q2"), agent: false });
      req.on("error", () => resolve("aborted"));
      req.on("response", () => resolve("answered"));
      req.end();
      setTimeout(() => req.destroy(), 100);
    });
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect(await third).toBe("aborted");
    await sleep(600);
    expect(arrivals.slice(before).filter((x) => x.path === "/queue/b")).toHaveLength(2);
    // Its log line says how long it really waited (~100 ms), not the ~400 ms it was due to. The
    // client's 100 ms also covers its admission and limit check before the hold began (16 ms of
    // them on a loaded 2-core machine gave 84), so the queue time alone is somewhat less.
    const gone = a.lines.find((l) => l.msg === "request" && l.status === 499 && l.path === "/queue/b");
    expect(gone?.queued_ms).toBeGreaterThanOrEqual(50);
    expect(gone?.queued_ms).toBeLessThan(350);
  });
});

describe("concurrency: max_in_flight 2, lease 1 s", () => {
  it("2 of 10 slow concurrent requests pass, then 2 again once they finish", async () => {
    const wave = () =>
      Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          send(i % 2 ? b.url : a.url, { path: "/slots/x?ms=300", headers: as("key-s1") }),
        ),
      );
    const first = await wave();
    expect(first.filter((r) => r.status === 200)).toHaveLength(2);
    const denied = first.find((r) => r.status === 429)!;
    expect(denied.json()).toMatchObject({ "violated-policies": ["p.slots"] });
    expect(denied.json<{ detail: string }>().detail).toContain("2 requests in flight at once");
    expect(Number(denied.headers["retry-after"])).toBe(1);
    const second = await wave();
    expect(second.filter((r) => r.status === 200)).toHaveLength(2);
  });

  it("a client that goes away and an upstream that fails both give their slot back", async () => {
    // Two requests the upstream never answers; their clients hang up.
    const hangUps = Array.from(
      { length: 2 },
      () =>
        new Promise<void>((resolve) => {
          const req = request(`${a.url}/slots/x?mode=hold`, { headers: as("key-s2"), agent: false });
          req.on("error", () => resolve());
          req.end();
          setTimeout(() => req.destroy(), 200);
        }),
    );
    await Promise.all(hangUps);
    await sleep(50);
    // Well within the lease: only releases can have freed the slots.
    for (let i = 0; i < 4; i++) {
      const r = await send(i % 2 ? b.url : a.url, { path: "/slots/x?mode=fail", headers: as("key-s2") });
      expect(r.status).toBe(502);
    }
    const both = await Promise.all(
      [a, b].map((g) => send(g.url, { path: "/slots/x?ms=100", headers: as("key-s2") })),
    );
    expect(both.map((r) => r.status)).toEqual([200, 200]);
  });

  it("a gateway killed mid-request frees its slots once the lease runs out", async () => {
    const doomed = await spawnGateway(config(setup.redis.url, upstream.url));
    const before = arrivals.length;
    const inFlight = [0, 1].map(() =>
      send(doomed.url, { path: "/slots/x?mode=hold", headers: as("key-s3") }).catch(() => null),
    );
    while (arrivals.length < before + 2) await sleep(10);
    const leasedAt = performance.now();
    doomed.child.kill("SIGKILL");
    await doomed.exited;
    await Promise.all(inFlight);
    expect((await send(a.url, { path: "/slots/x", headers: as("key-s3") })).status).toBe(429);
    await sleep(Math.max(0, 1100 - (performance.now() - leasedAt)));
    expect((await send(b.url, { path: "/slots/x", headers: as("key-s3") })).status).toBe(200);
  });

  it("a slot key carries the caller's hash tag and a TTL while a lease is held", async () => {
    const before = arrivals.length;
    const holding = send(a.url, { path: "/slots/x?mode=hold", headers: as("key-s4") });
    while (arrivals.length < before + 1) await sleep(10);
    const keys = await setup.redis.client.keys("tollgate:*p.slots");
    expect(keys).toEqual(["tollgate:{c:s4}:p.slots"]);
    const ttl = await setup.redis.client.pttl(keys[0]!);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2000);
    held.pop()!.end("done");
    expect((await holding).status).toBe(200);
    // The last lease given back empties the set, and Redis drops the key.
    await sleep(50);
    expect(await setup.redis.client.exists("tollgate:{c:s4}:p.slots")).toBe(0);
  });
});
