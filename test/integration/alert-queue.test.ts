// The alert queue (src/alerts/queue.ts) against a real redis-server and a real 3-master Redis
// Cluster, on connections made as the gateway makes them: an event raised by many instances at
// once is claimed by one and queued once; a delivery claimed by one instance is no other's until
// its lease ends; the queue's bound drops and says so; a claim lives until its period's end.
// Every command of the queue is one slot, so a Cluster runs its scripts (CROSSSLOT otherwise).
import type { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ALERT_LEASE_MS, type Delivery, type Raise, RedisAlertQueue } from "../../src/alerts/queue.js";
import { StoreError } from "../../src/errors.js";
import { connect, waitUntilReady } from "../../src/limits/stores/redis/connection.js";
import { freePort } from "../support/ports.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";

const NOW = Date.now();

const delivery = (event: string, target: string): Delivery => ({
  id: `${event}:${target}`,
  target,
  event: "budget.threshold",
  body: JSON.stringify({ id: event }),
  attempts: 0,
});

const raise = (event: string, untilMs = NOW + 60_000): Raise => ({
  eventId: event,
  untilMs,
  deliveries: [
    { delivery: delivery(event, "webhook:a"), dueMs: NOW },
    { delivery: delivery(event, "webhook:b"), dueMs: NOW },
  ],
});

function queueBehaviour(
  kind: string,
  connection: () => Promise<Redis | Cluster>,
  raw: () => Redis | Cluster,
) {
  const opened: (Redis | Cluster)[] = [];
  afterAll(() => {
    for (const c of opened) c.disconnect();
  });
  async function instance(prefix: string, max = 10_000): Promise<RedisAlertQueue> {
    const client = await connection();
    opened.push(client);
    return new RedisAlertQueue({ client, prefix: () => prefix, max: () => max, timeoutMs: 1000 });
  }

  it(`${kind}: an event raised by four instances at once is claimed and queued once`, async () => {
    const queues = await Promise.all([1, 2, 3, 4].map(() => instance("aq1:")));
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => queues[i % 4]!.raise(raise("e1"))),
    );
    expect(results.filter((r) => r.first)).toEqual([{ first: true, queued: 2, dropped: 0 }]);
    expect(await queues[0]!.size()).toBe(2);
    const until = Number(await raw().call("PEXPIRETIME", "aq1:{alerts}:claim:e1"));
    expect(until).toBe(NOW + 60_000);
  });

  it(`${kind}: a claimed delivery is no other instance's until its lease ends`, async () => {
    const [q1, q2] = await Promise.all([instance("aq2:"), instance("aq2:")]);
    await q1!.raise(raise("e2"));
    const [c1, c2] = await Promise.all([q1!.claim(NOW, 1), q2!.claim(NOW, 1)]);
    expect([...c1!, ...c2!].map((d) => d.id).sort()).toEqual(["e2:webhook:a", "e2:webhook:b"]);
    expect(await q1!.claim(NOW + ALERT_LEASE_MS - 1, 10)).toEqual([]);
    // The instance holding them died: after the lease, both are another's to send.
    const again = await q2!.claim(NOW + ALERT_LEASE_MS, 10);
    expect(again.map((d) => d.id).sort()).toEqual(["e2:webhook:a", "e2:webhook:b"]);
    // One sent, one to retry later with its attempts.
    await q2!.done("e2:webhook:a");
    await q2!.retry(
      { ...again.find((d) => d.id === "e2:webhook:b")!, attempts: 1 },
      NOW + ALERT_LEASE_MS + 5000,
    );
    expect(await q1!.claim(NOW + ALERT_LEASE_MS + 4999, 10)).toEqual([]);
    expect(await q1!.claim(NOW + ALERT_LEASE_MS + 5000, 10)).toEqual([
      { ...delivery("e2", "webhook:b"), attempts: 1 },
    ]);
    expect(await q1!.size()).toBe(1);
  });

  it(`${kind}: past its bound the queue drops what is new, and says how many`, async () => {
    const q = await instance("aq3:", 3);
    expect(await q.raise(raise("e3a"))).toEqual({ first: true, queued: 2, dropped: 0 });
    expect(await q.raise(raise("e3b"))).toEqual({ first: true, queued: 1, dropped: 1 });
    expect(await q.raise(raise("e3c"))).toEqual({ first: true, queued: 0, dropped: 2 });
    expect(await q.size()).toBe(3);
  });

  it(`${kind}: a claim ends with its period: the next period's event is new`, async () => {
    const q = await instance("aq4:");
    expect((await q.raise(raise("e4", Date.now() + 300))).first).toBe(true);
    expect((await q.raise(raise("e4", Date.now() + 300))).first).toBe(false);
    await new Promise((r) => setTimeout(r, 400));
    expect((await q.raise(raise("e4"))).first).toBe(true);
  });
}

describe("alert queue on a single Redis", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });
  queueBehaviour(
    "single",
    async () => {
      const client = connect({ url: redis.url, timeoutMs: 1000 });
      await waitUntilReady(client, 5000);
      return client;
    },
    () => redis.client,
  );

  it("single: a store that is down rejects with a StoreError, never hangs", async () => {
    const client = connect({ url: `redis://127.0.0.1:${await freePort()}`, timeoutMs: 200 });
    try {
      const q = new RedisAlertQueue({ client, prefix: () => "down:", max: () => 10, timeoutMs: 200 });
      await expect(q.raise(raise("down"))).rejects.toBeInstanceOf(StoreError);
      await expect(q.claim(NOW, 1)).rejects.toBeInstanceOf(StoreError);
    } finally {
      client.disconnect();
    }
  });
});

describe("alert queue on a Redis Cluster", () => {
  let cluster: RedisClusterProcess;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  });
  afterAll(async () => {
    await cluster.stop();
  });
  queueBehaviour(
    "cluster",
    async () => {
      const client = connect({ cluster: cluster.urls, timeoutMs: 1000 });
      await waitUntilReady(client, 5000);
      return client;
    },
    () => cluster.client,
  );
});
