// A dead or hung Redis must never hang or crash a request: `store.timeout` bounds every check
// and `on_failure` decides the answer.
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { freePort } from "../support/ports.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info }
store: { url: ${redisUrl}, timeout: 100ms, on_failure: open, breaker: { cooldown: 500ms } }
upstreams: { api: ${upstreamUrl} }
clients: [{ id: c1, key: k1, plan: p }]
plans:
  p: { global: { rate: 5/s, burst: 10 } }
routes:
  - { name: closed, match: { path: /closed }, upstream: api, on_failure: closed }
  - { name: open, match: { path: / }, upstream: api }
`;

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(async () => {
  await upstream.close();
});

describe("Redis unreachable from the start", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await startGateway(config(`redis://127.0.0.1:${await freePort()}`, upstream.url));
  });
  afterAll(async () => {
    await gw.stop();
  });

  it("starts anyway; `open` forwards, degraded, within 500 ms", async () => {
    const r = await send(gw.url, { path: "/x", headers: { "x-api-key": "k1" } });
    expect(r.status).toBe(200);
    expect(r.headers["x-ratelimit-degraded"]).toBe("true");
    expect(r.ms).toBeLessThan(500);
  });

  it("`closed` answers 503 problem+json with Retry-After, within 500 ms", async () => {
    const r = await send(gw.url, { path: "/closed", headers: { "x-api-key": "k1" } });
    expect(r.status).toBe(503);
    expect(r.ms).toBeLessThan(500);
    expect(r.headers["x-ratelimit-degraded"]).toBe("true");
    expect(r.headers["retry-after"]).toBe("1");
    expect(r.json()).toMatchObject({
      type: "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",
      status: 503,
    });
  });

  it("is not ready (a route fails closed), but alive, and counts store errors", async () => {
    const ready = await send(gw.adminUrl, { path: "/readyz" });
    expect(ready.status).toBe(503);
    expect(ready.json<{ reason: string }>().reason).toMatch(/limit store/);
    expect((await send(gw.adminUrl, { path: "/healthz" })).status).toBe(200);
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(metrics).toMatch(/tollgate_store_errors_total\{reason="connection"\} [1-9]/);
    expect(metrics).toMatch(/tollgate_requests_total\{route="closed",decision="degraded_closed"\} 1/);
  });
});

describe("Redis paused longer than the timeout", () => {
  let redis: RedisProcess;
  let gw: InProcessGateway;
  beforeAll(async () => {
    redis = await startRedis();
    gw = await startGateway(config(redis.url, upstream.url));
  });
  afterAll(async () => {
    await gw.stop();
    await redis.stop();
  });

  it("answers every request within timeout + 100 ms, then recovers", async () => {
    expect(
      (await send(gw.url, { path: "/x", headers: { "x-api-key": "k1" } })).headers["x-ratelimit-degraded"],
    ).toBeUndefined();
    await redis.client.call("CLIENT", "PAUSE", "1500", "ALL");
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        send(gw.url, { path: i % 2 ? "/x" : "/closed", headers: { "x-api-key": "k1" } }),
      ),
    );
    for (const r of replies) {
      // Client-side time also holds 20 connection set-ups in this same process.
      expect(r.ms).toBeLessThan(250);
      expect(r.headers["x-ratelimit-degraded"]).toBe("true");
    }
    // What the timeout bounds: the gateway's own wait for the store, per its request log.
    const checks = gw.logs.lines
      .filter((l) => String(l.decision).startsWith("degraded"))
      .map((l) => Number(l.check_ms));
    expect(checks).toHaveLength(20);
    for (const ms of checks) expect(ms).toBeLessThan(100 + 30);
    expect(new Set(replies.map((r) => r.status))).toEqual(new Set([200, 503]));
    // The pause ends 1.5 s after it began; the breaker (opened by those 20 timeouts) probes
    // every 500 ms, so decisions must come from Redis again well within 2 s of that.
    const pauseEnds = performance.now() + 1500 - 200;
    await new Promise((r) => setTimeout(r, 1300));
    for (;;) {
      const after = await send(gw.url, { path: "/x", headers: { "x-api-key": "k1" } });
      if (after.headers["x-ratelimit-degraded"] === undefined) {
        // A real decision again, and an allowed one: the checks that timed out were still
        // queued in the paused Redis, but past their deadline they wrote nothing (issue 13.5).
        expect(after.status).toBe(200);
        expect(after.headers["ratelimit-limit"]).toBe("10");
        break;
      }
      expect(performance.now() - pauseEnds).toBeLessThan(2000);
      await new Promise((r) => setTimeout(r, 50));
    }
  });
});

describe("A client that leaves while its check waits on the store", () => {
  let redis: RedisProcess;
  let gw: InProcessGateway;
  let connections = 0;
  const countConnection = () => {
    connections++;
  };
  beforeAll(async () => {
    redis = await startRedis();
    gw = await startGateway(config(redis.url, upstream.url).replace("timeout: 100ms", "timeout: 2s"));
    upstream.server.on("connection", countConnection);
  });
  afterAll(async () => {
    upstream.server.off("connection", countConnection);
    await gw.stop();
    await redis.stop();
  });

  it("takes no upstream connection for the answer nobody reads", async () => {
    // Warm: the gateway's Redis connection is up and the upstream pool has its first connection.
    expect((await send(gw.url, { path: "/x", headers: { "x-api-key": "k1" } })).status).toBe(200);
    const connectionsBefore = connections;
    const receivedBefore = upstream.received.length;
    await redis.client.call("CLIENT", "PAUSE", "600", "ALL");
    // Twenty clients each hold the one pooled connection busy if forwarded: they send, wait
    // for the check, and leave before the store answers.
    const sockets = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const socket = await rawConnect(gw.url);
        socket.write(`GET /x?n=${i} HTTP/1.1\r\nHost: t\r\nX-Api-Key: k1\r\n\r\n`);
        return socket;
      }),
    );
    await new Promise((r) => setTimeout(r, 150));
    for (const socket of sockets) socket.destroy();
    // The pause ends; the checks come back allowed, for clients already gone.
    await new Promise((r) => setTimeout(r, 800));
    expect(upstream.received.length).toBe(receivedBefore);
    expect(connections - connectionsBefore).toBe(0);
    const after = await send(gw.url, { path: "/x", headers: { "x-api-key": "k1" } });
    expect(after.status).toBe(200);
    // Logged as the client leaving (or refused by the limit: the bucket holds 10), never forwarded.
    const statuses = gw.logs.lines.slice(-21, -1).map((l) => l.status);
    expect(statuses.filter((s) => s !== 429 && s !== 499)).toEqual([]);
    expect(statuses).toContain(499);
  });
});

function rawConnect(url: string): Promise<Socket> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1", () => resolve(socket));
    socket.on("error", reject);
  });
}
