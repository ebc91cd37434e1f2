// Two gateway processes on a real 3-master Redis Cluster: exact limits per caller with callers
// spread over all shards, a route limit and the global limit decided together, and a lost
// master: callers on the other shards stay exact, callers on the dead shard follow on_failure.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, metricValue, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const CALLERS = 12;
const ids = (prefix: string) => Array.from({ length: CALLERS }, (_, i) => `${prefix}${i + 1}`);

const config = (seeds: string[], upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store:
  cluster: [${seeds.join(", ")}]
  timeout: 500ms
  on_failure: closed
upstreams: { api: ${upstreamUrl} }
clients:
${[...ids("c"), ...ids("d"), "combo"].map((id) => `  - { id: ${id}, key: key-${id}, plan: p }`).join("\n")}
plans:
  p:
    global: { rate: 1/h, burst: 10 }
    routes:
      narrow: { rate: 1/h, burst: 3 }
routes:
  - { name: narrow, match: { path: /narrow }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

let cluster: RedisClusterProcess;
let upstream: TestUpstream;
let a: GatewayProcess;
let b: GatewayProcess;

beforeAll(async () => {
  cluster = await startRedisCluster();
  upstream = await startUpstream();
  const yaml = config(cluster.urls, upstream.url);
  [a, b] = await Promise.all([spawnGateway(yaml), spawnGateway(yaml)]);
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await upstream?.close();
  await cluster?.stop();
});

const hit = (i: number, id: string, path = "/x") =>
  send(i % 2 ? b.url : a.url, { path, headers: { "x-api-key": `key-${id}` } });

describe("a 3-master cluster behind two gateway instances", () => {
  it(`${CALLERS} callers × 100 concurrent requests: exactly 10 admitted each, keys on all three shards`, async () => {
    const replies = await Promise.all(
      ids("c").flatMap((id) =>
        Array.from({ length: 100 }, (_, i) => hit(i, id).then((r) => [id, r.status] as const)),
      ),
    );
    const seen: Record<number, number> = {};
    for (const [, status] of replies) seen[status] = (seen[status] ?? 0) + 1;
    for (const id of ids("c")) {
      expect(
        replies.filter(([who, status]) => who === id && status === 200),
        `${id} (statuses: ${JSON.stringify(seen)})`,
      ).toHaveLength(10);
    }
    const keys = await Promise.all(
      cluster.ports.map(async (port) => {
        const node = cluster.client.nodes("master").find((n) => n.options.port === port)!;
        return node.keys("tollgate:*");
      }),
    );
    for (const onShard of keys) expect(onShard.length).toBeGreaterThan(0);
  });

  it("a route limit and the global limit of one caller are decided together", async () => {
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => hit(i, "combo", "/narrow")));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(3);
    // The 17 denied by the route limit took nothing from the global one: 10 - 3 - this one.
    const other = await hit(0, "combo");
    expect(other.headers.ratelimit).toContain('"p.global";r=6');
  });

  it("killing one master: callers on the other shards stay exact, callers on the dead shard follow on_failure (closed)", async () => {
    const keyOf = (id: string) => `tollgate:{c:${id}}:p.global`;
    const shardOf = new Map(
      await Promise.all(ids("d").map(async (id) => [id, await cluster.portOf(keyOf(id))] as const)),
    );
    const counts = cluster.ports.map((port) => [...shardOf.values()].filter((p) => p === port).length);
    // The shard with the most of these callers: most checks now fail.
    const victim = cluster.ports[counts.indexOf(Math.max(...counts))]!;
    const dead = ids("d").filter((id) => shardOf.get(id) === victim);
    await cluster.kill(victim);

    // Traffic for the dead shard alone opens its breaker on both gateways, once its failures
    // outweigh the successes of the earlier tests still in the window (error_rate 50 %)…
    const breakerState = (g: GatewayProcess) => metricValue(g.adminUrl, /^tollgate_breaker_state (\d)$/m);
    for (let round = 0; round < 40; round++) {
      const statuses = await Promise.all(
        Array.from({ length: 100 }, (_, i) => hit(i, dead[i % dead.length]!).then((r) => r.status)),
      );
      expect(statuses.every((s) => s === 503)).toBe(true);
      if ((await breakerState(a)) === 2 && (await breakerState(b)) === 2) break;
    }
    expect(await breakerState(a)).toBe(2);
    expect(await breakerState(b)).toBe(2);
    expect(
      [...a.lines, ...b.lines].some(
        (l) =>
          l.msg === `limit store breaker open for shard 127.0.0.1:${victim}` &&
          l.shard === `127.0.0.1:${victim}`,
      ),
    ).toBe(true);

    // …and only its own: a breaker over the whole store would now answer everyone 503.
    const replies = await Promise.all(
      ids("d").flatMap((id) =>
        Array.from({ length: 15 }, (_, i) => hit(i, id).then((r) => [id, r.status, r.headers] as const)),
      ),
    );
    for (const id of ids("d")) {
      const mine = replies.filter(([who]) => who === id);
      const statuses = mine.map(([, s]) => s);
      if (shardOf.get(id) === victim) {
        expect(
          statuses.every((s) => s === 503),
          `${id} on the dead shard`,
        ).toBe(true);
      } else {
        expect(
          statuses.filter((s) => s === 200),
          `${id} on a live shard: ${JSON.stringify(mine.map(([, s, h]) => [s, h["x-ratelimit-degraded"] ?? ""]))}`,
        ).toHaveLength(10);
        expect(
          statuses.filter((s) => s === 429),
          `${id} on a live shard`,
        ).toHaveLength(5);
        expect(mine.every(([, , h]) => h["x-ratelimit-degraded"] === undefined)).toBe(true);
      }
    }
  });
});
