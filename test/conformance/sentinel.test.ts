// store.sentinel: the store finds the master through Redis Sentinel and behaves as on a single
// Redis (the token-bucket and window cases of the shared suite).
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore } from "../../src/limits/stores/redis/store.js";
import { type SentinelProcess, startSentinel } from "../support/redis-sentinel.js";
import { freshKey, LAB } from "./suite.js";

let sentinel: SentinelProcess;
const stores: RedisStore[] = [];
beforeAll(async () => {
  sentinel = await startSentinel();
}, 30_000);
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await sentinel?.stop();
});

describe("RedisStore through Redis Sentinel", () => {
  it("finds the master and decides exactly, shared by two stores", async () => {
    const make = async () => {
      const store = new RedisStore({
        sentinel: { name: sentinel.name, nodes: [sentinel.node] },
        timeoutMs: 1000,
      });
      stores.push(store);
      expect(await store.waitUntilReady(5000)).toBe(true);
      return store;
    };
    const [one, two] = [await make(), await make()];
    const key = freshKey("sentinel");
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? one : two).check([{ key, spec: LAB, cost: 1 }])),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(10);
    // The state is on the master the sentinel named.
    expect(await sentinel.master.client.exists(key)).toBe(1);
  });
});

describe("a graceful failover (SENTINEL FAILOVER): the old master still answers, as a master", () => {
  let pair: SentinelProcess;
  beforeAll(async () => {
    pair = await startSentinel({ replicas: 1 });
  }, 30_000);
  afterAll(async () => {
    await pair?.stop();
  });

  it("the store leaves it at +switch-master, before any check fails", async () => {
    const store = new RedisStore({ sentinel: { name: pair.name, nodes: [pair.node] }, timeoutMs: 1000 });
    stores.push(store);
    expect(await store.waitUntilReady(5000)).toBe(true);
    const key = freshKey("graceful");
    const shard = () => store.shardOf([{ key, spec: LAB, cost: 1 }]);
    expect(shard()).toBe(`127.0.0.1:${pair.master.port}`);
    // NOGOODSLAVE until the sentinel has connected to the replica and read its INFO.
    for (let tries = 0; ; tries++) {
      const answer = await pair.client.call("SENTINEL", "failover", pair.name).catch((err: Error) => err);
      if (!(answer instanceof Error)) break;
      if (!answer.message.startsWith("NOGOODSLAVE") || tries === 100) throw answer;
      await new Promise((r) => setTimeout(r, 100));
    }
    const started = Date.now();
    // The old master stays writable until the sentinel converts it, seconds later: a store
    // that waited for a failed check would go on deciding there, apart from every other.
    while (shard() !== `127.0.0.1:${pair.replicas[0]!.port}`) {
      if (Date.now() - started > 5000) throw new Error(`still on ${shard()} 5 s after SENTINEL FAILOVER`);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(String(await pair.master.client.info("replication"))).toMatch(/role:master/);
    expect((await store.check([{ key, spec: LAB, cost: 1 }])).allowed).toBe(true);
    expect(await pair.replicas[0]!.client.exists(key)).toBe(1);
    expect(await pair.master.client.exists(key)).toBe(0);
  });
});

describe("a master killed: the store on the promoted replica before +switch-master is announced", () => {
  let trio: SentinelProcess;
  beforeAll(async () => {
    trio = await startSentinel({ replicas: 2, downAfterMs: 500 });
  }, 30_000);
  afterAll(async () => {
    await trio?.stop();
  });

  it("keeps its connection there when the announcement comes", async () => {
    const store = new RedisStore({
      sentinel: { name: trio.name, nodes: [trio.node] },
      timeoutMs: 1000,
      redisOptions: { connectionName: "tollgate-store" },
    });
    stores.push(store);
    expect(await store.waitUntilReady(5000)).toBe(true);
    const announced = new Redis({ port: Number(trio.node.split(":")[1]), host: "127.0.0.1" });
    await announced.subscribe("+switch-master");
    const switched = new Promise<string>((resolve) => announced.on("message", (_c, m: string) => resolve(m)));
    const shard = () => store.shardOf([{ key: "k", spec: LAB, cost: 1 }]);
    await trio.master.kill();
    // The sentinel names the promoted replica, then reconfigures the other one (about a
    // second) and only then announces +switch-master. The store's reconnection asks in between.
    const replicaPorts = trio.replicas.map((r) => r.port);
    let connectionId = "";
    let onPromoted = -1;
    const started = Date.now();
    for (;;) {
      const port = Number(shard().split(":")[1]);
      if (replicaPorts.includes(port)) {
        const promoted = trio.replicas[replicaPorts.indexOf(port)]!;
        const list = String(await promoted.client.call("CLIENT", "LIST"));
        connectionId = list.match(/id=(\d+) [^\n]*name=tollgate-store /)?.[1] ?? "";
        if (connectionId !== "") {
          onPromoted = port;
          break;
        }
      }
      if (Date.now() - started > 10_000) throw new Error(`never on a replica: ${shard()}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    const message = await switched;
    expect(message.split(" ")[4]).toBe(String(onPromoted));
    await new Promise((r) => setTimeout(r, 300));
    const promoted = trio.replicas[replicaPorts.indexOf(onPromoted)]!;
    const list = String(await promoted.client.call("CLIENT", "LIST"));
    // The same connection: the announcement of where it already is did not make it leave.
    expect(list.match(/id=(\d+) [^\n]*name=tollgate-store /)?.[1]).toBe(connectionId);
    announced.disconnect();
  }, 20_000);
});
