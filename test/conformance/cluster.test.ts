// The same behavioural suite against a real 3-master Redis Cluster the test starts, plus what
// only a cluster has: scripts reaching every node (NOSCRIPT after a flush), keys spread over
// all shards, checks of different callers batched per slot, a slot migrating (ASK, MOVED).
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TokenBucketSpec } from "../../src/limits/spec.js";
import { RedisStore } from "../../src/limits/stores/redis/store.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";
import { settlementConformance } from "./settlement-suite.js";
import { freshKey, storeConformance } from "./suite.js";

let cluster: RedisClusterProcess;
const stores: RedisStore[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster();
}, 30_000);
afterAll(async () => {
  await spare?.catch(() => {});
  await Promise.all(stores.map((s) => s.close()));
  await cluster?.stop();
});

async function newStore(): Promise<RedisStore> {
  const store = new RedisStore({ cluster: cluster.urls, timeoutMs: 1000 });
  stores.push(store);
  if (!(await store.waitUntilReady(5000))) throw new Error("test cluster not reachable");
  return store;
}

// The suite's cases open a new instance between a write and the read that checks it, on a clock
// of their own while the keys expire on Redis's. Connecting to a cluster under load can take a
// second or more, so the next instance is always already connecting: the case takes it ready.
let spare: Promise<RedisStore> | undefined;
function nextInstance(): Promise<RedisStore> {
  const ready = spare ?? newStore();
  spare = newStore();
  spare.catch(() => {}); // an unused spare that failed fails the case that takes it, not this one
  return ready;
}

const clusterHarness = () => ({
  store: nextInstance,
  pttl: async (key: string) => {
    const ms = await cluster.client.pttl(key);
    return ms < 0 ? null : ms;
  },
  advance: (ms: number) => new Promise<void>((r) => setTimeout(r, ms)),
});
storeConformance("RedisStore on a 3-master cluster", clusterHarness);
settlementConformance("RedisStore on a 3-master cluster", clusterHarness);

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

  it("follows ASK while a caller's slot migrates and MOVED once it moved, and stays exact", async () => {
    const store = await newStore();
    const five: TokenBucketSpec = { ...spec, burst: 5 };
    const key = freshKey("moving");
    const take = () => store.check([{ key, spec: five, cost: 1 }]);
    for (let i = 0; i < 3; i++) expect((await take()).allowed).toBe(true);

    const from = await cluster.portOf(key);
    const to = cluster.ports.find((p) => p !== from)!;
    const slot = Number(await cluster.client.cluster("KEYSLOT", key));
    const nodes = new Map(cluster.ports.map((port) => [port, new Redis({ port, lazyConnect: false })]));
    try {
      const idOf = async (port: number) => String(await nodes.get(port)!.cluster("MYID"));
      const [fromId, toId] = [await idOf(from), await idOf(to)];
      // The steps of `redis-cli --cluster reshard` for one slot, stopped half-way.
      await nodes.get(to)!.cluster("SETSLOT", slot, "IMPORTING", fromId);
      await nodes.get(from)!.cluster("SETSLOT", slot, "MIGRATING", toId);
      expect(await nodes.get(from)!.migrate("127.0.0.1", to, key, 0, 5000)).toBe("OK");

      // The source no longer has the key and answers ASK: the check is asked of the target.
      await expect(nodes.get(from)!.get(key)).rejects.toThrow(/^ASK /);
      const during = await take();
      expect(during.allowed).toBe(true);
      expect(during.outcomes[0]!.remaining).toBe(1);
      // A check with a denial record (as the gateway's are) names only its limits' keys (the
      // record is written after the fact): it too is asked of the target, without waiting for
      // the slot to finish moving.
      const denial = {
        logKey: key.replace(/:[^:]*$/, ":denials"),
        topKey: "t",
        caller: "client:x",
        route: "r",
      };
      const withRecord = await store.check([{ key, spec: five, cost: 1 }], { denial });
      expect(withRecord.allowed).toBe(true);
      expect(withRecord.outcomes[0]!.remaining).toBe(0);

      for (const port of [to, from, ...cluster.ports.filter((p) => p !== to && p !== from)]) {
        await nodes.get(port)!.cluster("SETSLOT", slot, "NODE", toId);
      }
      // The store's slot map still names the source, which now answers MOVED.
      await expect(nodes.get(from)!.get(key)).rejects.toThrow(/^MOVED /);
      expect((await take()).allowed).toBe(false);
      // The per-master breaker follows the slot to its new master.
      expect(store.shardOf([{ key, spec: five, cost: 1 }])).toBe(`127.0.0.1:${to}`);
    } finally {
      for (const node of nodes.values()) node.disconnect();
    }
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

  it("a request over two hash tags records its denial with the names of the limits that denied", async () => {
    const store = await newStore();
    const mine = freshKey("mine-named");
    const logKey = mine.replace(/:[^:]*$/, ":denials");
    const byIp = "test:{ip:198.51.100.10}:route";
    const wide: TokenBucketSpec = { ...spec, name: "c.ip", burst: 100 };
    const one: TokenBucketSpec = { ...spec, name: "c.mine", burst: 1 };
    // The route's limit first, under another hash tag; the caller's own under its log's tag.
    const both = [
      { key: byIp, spec: wide, cost: 1 },
      { key: mine, spec: one, cost: 1 },
    ];
    const denial = { logKey, topKey: "test:{top}:1", caller: "client:named", route: "r" };
    expect((await store.check(both, { denial })).allowed).toBe(true);
    expect((await store.check(both, { denial })).allowed).toBe(false);
    const [recorded] = await store.denials(logKey);
    expect(recorded).toMatchObject({ route: "r", limits: ["c.mine"] });
    expect(await store.topDenials(["test:{top}:1"], 5)).toEqual([{ caller: "client:named", count: 1 }]);
  });
});
