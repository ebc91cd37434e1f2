// `workers: 2`: two processes share the proxy listener and one Redis-backed limit; the primary's
// /metrics sums the workers'; a reload reaches both; a crashed worker is replaced; SIGTERM
// drains them all.
import { readFileSync, writeFileSync } from "node:fs";
import { Agent } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const config = (redisUrl: string, upstreamUrl: string, burst: number) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: workers-admin }
workers: 2
log: { level: info, requests: false }
store: { url: ${redisUrl}, timeout: 500ms }
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: w1, key: key-w1, plan: p }
  - { id: w2, key: key-w2, plan: p }
  - { id: w3, key: key-w3, plan: p }
plans:
  p: { global: { rate: 1/h, burst: ${burst} } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: GatewayProcess;
let file: string;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await spawnGateway(config(redis.url, upstream.url, 10));
  file = String(gw.lines.find((l) => l.msg === "primary listening")?.config);
}, 30_000);
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

const workerPids = () => gw.lines.filter((l) => l.msg === "worker listening").map((l) => Number(l.pid));
const metric = async (pattern: RegExp) =>
  Number(pattern.exec((await send(gw.adminUrl, { path: "/metrics" })).body)?.[1] ?? Number.NaN);

describe("workers: 2", () => {
  it("two workers share the listener and enforce one limit; /metrics sums both", async () => {
    // Each worker logs as it starts listening; the primary's "tollgate listening" may come first.
    const deadline = Date.now() + 5000;
    while (new Set(workerPids()).size < 2 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(new Set(workerPids()).size).toBe(2);
    const agents = [new Agent({ keepAlive: false }), new Agent({ keepAlive: false })];
    const replies = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        send(gw.url, { path: "/x", headers: { "x-api-key": "key-w1" }, agent: agents[i % 2] }),
      ),
    );
    for (const a of agents) a.destroy();
    expect(replies.filter((r) => r.status === 200)).toHaveLength(10);
    const allowed = await metric(/tollgate_requests_total\{route="default",decision="allowed"\} (\d+)/);
    const limited = await metric(/tollgate_requests_total\{route="default",decision="limited"\} (\d+)/);
    expect(allowed).toBe(10);
    expect(limited).toBe(50);
  });

  it("a reload reaches every worker", async () => {
    writeFileSync(file, readFileSync(file, "utf8").replace("burst: 10", "burst: 4"));
    const r = await send(gw.adminUrl, {
      path: "/admin/reload",
      method: "POST",
      headers: { authorization: "Bearer workers-admin" },
    });
    expect(r.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const replies = await Promise.all(
      Array.from({ length: 20 }, () => send(gw.url, { path: "/x", headers: { "x-api-key": "key-w2" } })),
    );
    expect(replies.filter((x) => x.status === 200)).toHaveLength(4);
    for (const reply of replies) expect(reply.headers["ratelimit-policy"]).toContain('"p.global";q=4');
  });

  it("a crashed worker is replaced, and requests keep being served", async () => {
    const [victim] = workerPids();
    process.kill(victim!, "SIGKILL");
    const deadline = Date.now() + 10_000;
    while (workerPids().length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(workerPids().length).toBe(3);
    expect(gw.lines.some((l) => l.msg === "worker exited; starting a replacement")).toBe(true);
    const replies = await Promise.all(
      Array.from({ length: 10 }, () => send(gw.url, { path: "/x", headers: { "x-api-key": "key-w3" } })),
    );
    expect(replies.filter((x) => x.status === 200)).toHaveLength(4);
  });

  it("SIGTERM drains the workers and the primary exits 0", async () => {
    const pids = workerPids().slice(-2);
    expect(await gw.stop("SIGTERM")).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  });
});
