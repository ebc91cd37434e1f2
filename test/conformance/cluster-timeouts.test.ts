// In a Redis Cluster a request whose limits live on two masters is decided slot by slot. When a
// later slot gives no decision (its master hung), the request is answered without the store's
// decision, so what the earlier slot took is given back (issue 13, item 5).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StoreTimeoutError } from "../../src/errors.js";
import type { LimitCheck, WindowSpec } from "../../src/limits/spec.js";
import { RedisStore } from "../../src/limits/stores/redis/store.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";
import { freshKey } from "./suite.js";

let cluster: RedisClusterProcess;
const stores: RedisStore[] = [];
const paused: number[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster();
}, 30_000);
afterAll(async () => {
  for (const pid of paused) process.kill(pid, "SIGCONT");
  await Promise.all(stores.map((s) => s.close()));
  await cluster?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The pid of the redis-server listening on `port`. */
async function pidOf(port: number): Promise<number> {
  const node = cluster.client.nodes("master").find((n) => n.options.port === port)!;
  const info = await node.info("server");
  return Number(/process_id:(\d+)/.exec(info)![1]);
}

const FIXED: WindowSpec = { algorithm: "fixed_window", name: "t.fixed", limit: 5, windowMs: 86_400_000 };

describe("Redis Cluster: a request spread over two masters", () => {
  it("gives back what the first slot took when the second times out", async () => {
    const store = new RedisStore({ cluster: cluster.urls, timeoutMs: 100 });
    stores.push(store);
    if (!(await store.waitUntilReady(5000))) throw new Error("test cluster not reachable");
    const mine = freshKey("mine");
    let other = freshKey("other");
    while ((await cluster.portOf(other)) === (await cluster.portOf(mine))) other = freshKey("other");
    const request: LimitCheck[] = [
      { key: mine, spec: FIXED, cost: 1 },
      { key: other, spec: FIXED, cost: 1 },
    ];
    // One answered call on each master first: the store learns their clocks.
    await store.check([{ key: `${mine}:warm`, spec: FIXED, cost: 1 }]);
    await store.check([{ key: `${other}:warm`, spec: FIXED, cost: 1 }]);

    const pid = await pidOf(await cluster.portOf(other));
    process.kill(pid, "SIGSTOP");
    paused.push(pid);
    try {
      const err = await store.check(request).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreTimeoutError);
      await sleep(300);
    } finally {
      process.kill(pid, "SIGCONT");
      paused.pop();
    }
    // The give-back is asynchronous: wait for the first slot's count to be back at 0.
    const until = performance.now() + 3000;
    while (!(await cluster.client.get(mine))?.endsWith(" 0") && performance.now() < until) await sleep(20);
    // Nothing was taken on either master: the whole limit is there on both.
    const allowed: boolean[] = [];
    for (let i = 0; i < 6; i++) allowed.push((await store.check(request)).allowed);
    expect(allowed).toEqual([true, true, true, true, true, false]);
  });
});
