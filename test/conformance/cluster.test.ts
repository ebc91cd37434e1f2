// The same behavioural suite against a real 3-master Redis Cluster the test starts, plus what
// only a cluster has: scripts reaching every node (NOSCRIPT after a flush), keys spread over
// all shards, checks of different callers batched per slot.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TokenBucketSpec } from "../../src/limits/spec.js";
import { RedisStore } from "../../src/limits/stores/redis.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";
import { freshKey, storeConformance } from "./suite.js";

let cluster: RedisClusterProcess;
const stores: RedisStore[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster();
}, 30_000);
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await cluster?.stop();
});

async function newStore(): Promise<RedisStore> {
  const store = new RedisStore({ cluster: cluster.urls, timeoutMs: 1000 });
  stores.push(store);
  if (!(await store.waitUntilReady(5000))) throw new Error("test cluster not reachable");
  return store;
}

storeConformance("RedisStore on a 3-master cluster", () => ({
  store: newStore,
  pttl: async (key) => {
    const ms = await cluster.client.pttl(key);
    return ms < 0 ? null : ms;
  },
  advance: (ms) => new Promise((r) => setTimeout(r, ms)),
}));

describe("Redis Cluster specifics", () => {
  const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "c.tb", burst: 3, intervalMs: 60_000 };

  it("callers' keys spread over all three shards, each decided exactly", async () => {
    const store = await newStore();
    const keys = Array.from({ length: 30 }, (_, i) => freshKey(`spread-${i}`));
    const results = await Promise.all(
      keys.flatMap((key) => Array.from({ length: 5 }, () => store.check([{ key, spec, cost: 1 }]))),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(30 * 3);
    const shards = new Set(await Promise.all(keys.map((k) => cluster.portOf(k))));
    expect(shards.size).toBe(3);
  });

  it("runs the scripts on a node whose script cache was flushed (NOSCRIPT → EVAL)", async () => {
    const store = await newStore();
    const key = freshKey("noscript");
    expect((await store.check([{ key, spec, cost: 1 }])).allowed).toBe(true);
    await Promise.all(cluster.client.nodes("master").map((node) => node.script("FLUSH")));
    expect((await store.check([{ key, spec, cost: 1 }])).outcomes[0]!.remaining).toBe(1);
    await store.charge([{ key, spec, cost: 1 }]);
    expect((await store.peek([{ key, spec, cost: 0 }]))[0]!.remaining).toBe(0);
  });

  it("a request whose limits sit under two hash tags is decided slot by slot", async () => {
    const store = await newStore();
    const mine = freshKey("mine");
    const byIp = "test:{ip:198.51.100.9}:route";
    const tight: TokenBucketSpec = { ...spec, name: "c.ip", burst: 1 };
    const both = [
      { key: mine, spec, cost: 1 },
      { key: byIp, spec: tight, cost: 1 },
    ];
    expect((await store.check(both)).allowed).toBe(true);
    const denied = await store.check(both);
    expect(denied.allowed).toBe(false);
    expect(denied.outcomes[1]!.allowed).toBe(false);
  });
});
