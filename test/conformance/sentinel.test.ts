// store.sentinel: the store finds the master through Redis Sentinel and behaves as on a single
// Redis (the token-bucket and window cases of the shared suite).
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
