// Keyed limits and route budgets on a real 3-master Redis Cluster: a route budget's key has a
// hash tag of its own, so a request with one is decided slot by slot, the caller's own limits
// first, and a later slot's denial gives back what the caller's slot took (cross-slot.ts).
import calculateSlot from "cluster-key-slot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LimitCheck, TokenBucketSpec } from "../../src/limits/spec.js";
import { RedisStore } from "../../src/limits/stores/redis/store.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";
import { keyedConformance } from "./keyed-suite.js";

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

keyedConformance("RedisStore on a 3-master cluster", () => ({
  store: newStore,
  atomic: false,
  slotOf: calculateSlot,
}));

describe("a route budget beside a caller's limits on a cluster", () => {
  const mine: TokenBucketSpec = {
    algorithm: "token_bucket",
    name: "k.mine",
    burst: 5,
    intervalMs: 3_600_000,
  };
  const budget: TokenBucketSpec = {
    algorithm: "token_bucket",
    name: "k.budget",
    burst: 1,
    intervalMs: 3_600_000,
  };

  it("caller limit 5, budget 1: once the budget is spent, the caller's denied requests leave its 4 as they were", async () => {
    const store = await newStore();
    const tag = `${process.pid}-${Date.now()}`;
    const budgetKey = `test:{k.budget:r=${tag}}`;
    const callers = ["a", "b", "c"].map((id) => `test:{c:${id}-${tag}}:k.mine`);
    // Three callers, each on another master: the budget's slot is never the caller's.
    const masters = new Set(await Promise.all([budgetKey, ...callers].map((k) => cluster.portOf(k))));
    expect(masters.size).toBeGreaterThan(1);
    for (const key of callers) expect(calculateSlot(key)).not.toBe(calculateSlot(budgetKey));
    const request = (key: string): LimitCheck[] => [
      { key, spec: mine, cost: 1 },
      { key: budgetKey, spec: budget, cost: 1 },
    ];
    const left = async (key: string) => (await store.peek([{ key, spec: mine, cost: 0 }]))[0]!.remaining;

    const first = await store.check(request(callers[0]!));
    expect(first.allowed).toBe(true);
    expect(await left(callers[0]!)).toBe(4);

    // Sequential: the caller's slot takes one, the budget's denies, the one goes back.
    for (let i = 0; i < 5; i++) {
      const denied = await store.check(request(callers[0]!));
      expect(denied.allowed).toBe(false);
      expect(denied.outcomes[1]!.allowed).toBe(false);
      expect(await left(callers[0]!)).toBe(4);
    }
    // Concurrent, from two instances: transient takes may deny some by the caller's own limit
    // meanwhile, but once every request is answered each caller has all it had.
    const other = await newStore();
    const burst = await Promise.all(
      Array.from({ length: 60 }, (_, i) => (i % 2 ? other : store).check(request(callers[i % 3]!))),
    );
    expect(burst.filter((d) => d.allowed)).toHaveLength(0);
    expect(await Promise.all(callers.map(left))).toEqual([4, 5, 5]);
  });
});
