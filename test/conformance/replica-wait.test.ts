// store.replicas: a check is answered as decided only once a replica holds its writes (WAIT in
// the check's pipeline). A real master and replica; the replica paused with SIGSTOP stands for a
// stalled replication link.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StoreReplicationError } from "../../src/errors.js";
import type { TokenBucketSpec } from "../../src/limits/spec.js";
import { RedisStore } from "../../src/limits/stores/redis/store.js";
import { freePort } from "../support/ports.js";
import { type RedisProcess, redisArgs, startRedis, waitForPing } from "../support/redis.js";
import { freshKey } from "./suite.js";

/** 10 at once, no refill worth counting while a test runs. */
const LAB: TokenBucketSpec = {
  algorithm: "token_bucket",
  name: "lab.global",
  burst: 10,
  intervalMs: 3_600_000,
};

let master: RedisProcess;
let replicaPort: number;
let replica: ReturnType<typeof spawn>;
let replicaClient: Redis;
const stores: RedisStore[] = [];

beforeAll(async () => {
  master = await startRedis();
  replicaPort = await freePort();
  replica = spawn("redis-server", redisArgs(replicaPort, ["--replicaof", "127.0.0.1", String(master.port)]), {
    stdio: "ignore",
  });
  await waitForPing(replicaPort, replica, async (probe) =>
    /master_link_status:up/.test(String(await probe.info("replication"))),
  );
  replicaClient = new Redis({ port: replicaPort, host: "127.0.0.1", maxRetriesPerRequest: 1 });
  replicaClient.on("error", () => {});
  // After a diskless sync the master streams writes to the replica only from its first
  // acknowledgement, up to a second after its link is up: a write must be acknowledged before
  // the tests' 100 ms waits mean anything. (A WAIT with no write before it returns at once.)
  for (let tries = 0; ; tries++) {
    await master.client.set("replica-wait:probe", String(tries));
    if (Number(await master.client.wait(1, 200)) >= 1) break;
    if (tries === 25) throw new Error("the replica never acknowledged the master");
  }
}, 30_000);
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  replicaClient?.disconnect();
  if (replica && replica.exitCode === null) {
    replica.kill("SIGCONT");
    const exited = once(replica, "exit");
    replica.kill("SIGKILL");
    await exited;
  }
  await master?.stop();
});

function store(wait: number): RedisStore {
  const s = new RedisStore({ url: master.url, timeoutMs: 500, replicas: { wait, timeoutMs: 100 } });
  stores.push(s);
  return s;
}

describe("store.replicas: { wait: 1 }", () => {
  it("answers once the replica holds the writes: the replica has every admitted charge", async () => {
    const s = store(1);
    expect(await s.waitUntilReady(2000)).toBe(true);
    const key = freshKey("wait");
    const results = await Promise.all(
      Array.from({ length: 30 }, () => s.check([{ key, spec: LAB, cost: 1 }])),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(10);
    // Read from the replica at once: WAIT vouched that it already holds them.
    expect(await replicaClient.exists(key)).toBe(1);
    const peeked = await s.peek([{ key, spec: LAB, cost: 1 }]);
    expect(peeked[0]!.remaining).toBe(0);
  });

  it("a replica that does not acknowledge: admissions fail with reason replication and are given back, denials stand", async () => {
    const s = store(1);
    expect(await s.waitUntilReady(2000)).toBe(true);
    const spent = freshKey("spent");
    for (let i = 0; i < 10; i++)
      expect((await s.check([{ key: spent, spec: LAB, cost: 1 }])).allowed).toBe(true);
    const fresh = freshKey("fresh");
    replica.kill("SIGSTOP");
    try {
      const admitted = s.check([{ key: fresh, spec: LAB, cost: 1 }]);
      await expect(admitted).rejects.toBeInstanceOf(StoreReplicationError);
      await expect(admitted).rejects.toMatchObject({ reason: "replication", acknowledged: 0, wanted: 1 });
      // The caller at its limit is still refused: a denial cannot over-admit.
      const denied = await s.check([{ key: spent, spec: LAB, cost: 1 }]);
      expect(denied.allowed).toBe(false);
    } finally {
      replica.kill("SIGCONT");
    }
    // What the unconfirmed admission took was given back on the master.
    await new Promise((r) => setTimeout(r, 200));
    const [after] = await s.peek([{ key: fresh, spec: LAB, cost: 1 }]);
    expect(after!.remaining).toBe(10);
  });

  it("asking for more replicas than there are fails every admission (wait: 2 with one replica)", async () => {
    const s = store(2);
    expect(await s.waitUntilReady(2000)).toBe(true);
    await expect(s.check([{ key: freshKey("two"), spec: LAB, cost: 1 }])).rejects.toMatchObject({
      reason: "replication",
      acknowledged: 1,
      wanted: 2,
    });
  });
});
