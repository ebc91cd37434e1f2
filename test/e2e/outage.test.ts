// Redis fails under load: every request still gets a fast, deliberate answer, and limits come
// back from Redis soon after it does.
import { Agent, request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const config = (redisUrl: string, upstreamUrl: string, policy: string, extra = "") => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store:
  url: ${redisUrl}
  timeout: 100ms
  on_failure: ${policy}
  local_fraction: 0.5
  # A short window: the breaker opens once failures outweigh the successes still in the window,
  # and a 10 s window full of the warm-up's successes made that depend on this machine's speed.
  breaker: { error_rate: 50%, min_requests: 20, window: 2s, cooldown: 1s }
# 256 connections: the 100 loops of one key, released at once when the breaker opens, stay
# within the three quarters of the pool one caller may hold (caller_share).
upstreams: { api: { url: ${upstreamUrl}, connections: 256 } }
clients:
  - { id: load, key: load-key, plan: big }
  - { id: r1, key: r1-key, plan: three }
  - { id: r2, key: r2-key, plan: three }
  - { id: l1, key: l1-key, plan: ten }
plans:
  big: { global: { rate: 100000/s, burst: 100000 } }
  three: { global: { rate: 1/m, burst: 3 } }
  ten: { global: { rate: 1/m, burst: 10 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
${extra}`;

interface Sample {
  startedAt: number;
  ms: number;
  status: number;
  degraded: boolean;
  error?: string;
}

/** `concurrency` keep-alive loops sending requests until `durationMs` has passed. */
async function load(url: string, concurrency: number, durationMs: number): Promise<Sample[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const { port } = new URL(url);
  const samples: Sample[] = [];
  const end = Date.now() + durationMs;
  const one = () =>
    new Promise<Sample>((resolve) => {
      const startedAt = Date.now();
      const t0 = performance.now();
      const req = request(
        { host: "127.0.0.1", port, path: "/load", agent, headers: { "x-api-key": "load-key" } },
        (res) => {
          res.resume();
          res.on("end", () =>
            resolve({
              startedAt,
              ms: performance.now() - t0,
              status: res.statusCode ?? 0,
              degraded: res.headers["x-ratelimit-degraded"] === "true",
            }),
          );
        },
      );
      req.setTimeout(5000, () => req.destroy(new Error("no answer within 5 s")));
      req.on("error", (err) =>
        resolve({ startedAt, ms: performance.now() - t0, status: 0, degraded: false, error: err.message }),
      );
      req.end();
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) samples.push(await one());
    }),
  );
  agent.destroy();
  return samples;
}

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(async () => {
  await upstream.close();
});

describe.each(["open", "closed"])("Redis SIGKILLed under load, on_failure: %s", (policy) => {
  let redis: RedisProcess;
  let gw: GatewayProcess;
  beforeAll(async () => {
    redis = await startRedis();
    gw = await spawnGateway(config(redis.url, upstream.url, policy));
  });
  afterAll(async () => {
    await gw.stop();
    await redis.stop();
  });

  it("answers every request, fast once the breaker is open, and recovers within 2 s", async () => {
    const t0 = Date.now();
    const running = load(gw.url, 100, 6000);
    await new Promise((r) => setTimeout(r, 1000));
    const killedAt = Date.now();
    await redis.kill();
    await new Promise((r) => setTimeout(r, 2000));
    await redis.restart();
    const backAt = Date.now();
    const samples = await running;

    const failed = samples.filter((s) => s.error);
    expect(failed, JSON.stringify(failed.slice(0, 3))).toHaveLength(0);
    const allowed = policy === "open" ? [200] : [200, 503];
    expect(samples.filter((s) => !allowed.includes(s.status))).toHaveLength(0);

    const openedAt = Number(gw.lines.find((l) => l.msg === "limit store breaker open")?.time ?? Number.NaN);
    expect(openedAt).toBeGreaterThanOrEqual(killedAt);
    const whileOpen = samples.filter((s) => s.startedAt >= openedAt && s.startedAt < backAt);
    expect(whileOpen.length).toBeGreaterThan(100);
    const slowestOpen = Math.max(...whileOpen.map((s) => s.ms));
    expect(slowestOpen).toBeLessThan(400);

    // Recovered: from some point within 2 s of Redis' return, no response is degraded.
    const after = samples.filter((s) => s.startedAt >= backAt).sort((a, b) => a.startedAt - b.startedAt);
    const lastDegraded = after.filter((s) => s.degraded).at(-1);
    const recoveredMs = lastDegraded ? lastDegraded.startedAt - backAt : 0;
    expect(recoveredMs).toBeLessThan(2000);

    const outage = samples.filter((s) => s.startedAt >= killedAt && s.startedAt < backAt);
    console.log(
      `[outage ${policy}] sent ${samples.length} in ${Date.now() - t0} ms; during the outage ${outage.length} sent, ` +
        `${outage.filter((s) => !s.error).length} answered (${outage.filter((s) => s.status === 503).length} x 503), ` +
        `slowest ${Math.round(Math.max(...outage.map((s) => s.ms)))} ms, slowest with breaker open ${Math.round(slowestOpen)} ms, ` +
        `breaker opened ${openedAt - killedAt} ms after the kill, decisions from Redis ${recoveredMs} ms after its return`,
    );

    // A burst-3 limit admits exactly 3 again.
    const statuses = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await send(gw.url, { path: "/x", headers: { "x-api-key": "r1-key" } })).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
  });
});

describe("on_failure: local", () => {
  let redis: RedisProcess;
  let gw: GatewayProcess;
  beforeAll(async () => {
    redis = await startRedis();
    gw = await spawnGateway(config(redis.url, upstream.url, "local"));
  });
  afterAll(async () => {
    await gw.stop();
    await redis.stop();
  });

  it("with local_fraction 0.5 and burst 10, one instance admits exactly 5 while Redis is down", async () => {
    await redis.kill();
    const replies = [];
    for (let i = 0; i < 10; i++)
      replies.push(await send(gw.url, { path: "/x", headers: { "x-api-key": "l1-key" } }));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);
    for (const r of replies) expect(r.headers["x-ratelimit-degraded"]).toBe("true");
    expect(replies[0]!.headers["ratelimit-limit"]).toBe("5");
    await redis.restart();
  });
});

describe("Redis paused longer than the timeout", () => {
  let redis: RedisProcess;
  let gw: GatewayProcess;
  beforeAll(async () => {
    redis = await startRedis();
    gw = await spawnGateway(config(redis.url, upstream.url, "closed"));
  });
  afterAll(async () => {
    await gw.stop();
    await redis.stop();
  });

  it("answers each request within timeout + 100 ms", async () => {
    // Connections are opened first, so the time measured is the gateway's answer, not the
    // test's own TCP set-up.
    const agent = new Agent({ keepAlive: true, maxSockets: 30 });
    const viaAgent = (key: string) => send(gw.url, { path: "/x", headers: { "x-api-key": key }, agent });
    const warm = await Promise.all(Array.from({ length: 30 }, () => viaAgent("load-key")));
    expect(warm.every((r) => r.status === 200)).toBe(true);
    await redis.client.call("CLIENT", "PAUSE", "1500", "ALL");
    const replies = await Promise.all(Array.from({ length: 30 }, () => viaAgent("load-key")));
    agent.destroy();
    const slowest = Math.max(...replies.map((r) => r.ms));
    console.log(
      `[paused] 30 requests during CLIENT PAUSE: statuses ${[...new Set(replies.map((r) => r.status))]}, slowest ${Math.round(slowest)} ms`,
    );
    for (const r of replies) {
      expect(r.status).toBe(503);
      expect(r.headers["x-ratelimit-degraded"]).toBe("true");
    }
    expect(slowest).toBeLessThan(100 + 100);
  });
});
