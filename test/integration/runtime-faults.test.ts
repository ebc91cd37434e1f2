// The change feed against a real redis-server (never 6379) that fails under it: Redis restarted
// empty while pub/sub was dead the whole time is noticed by the epoch on every instance within
// one reconcile, however the stream looks; and a subscriber whose SUBSCRIBE after a reconnect
// never gets an answer (Redis hung right then) or is flushed by stop() leaves no unhandled
// rejection behind (one crashed the gateway: ioredis' own resubscribe drops its promise).
import type { Cluster, Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { connect, waitUntilReady } from "../../src/limits/stores/redis/connection.js";
import { RedisKeyStore } from "../../src/operator-state/api-keys.js";
import { RedisChangeFeed } from "../../src/operator-state/changes.js";
import { deadPort } from "../support/ports.js";
import { type RedisProcess, startRedis } from "../support/redis.js";

let redis: RedisProcess;
const opened: (() => unknown)[] = [];
const rejections: unknown[] = [];
const onRejection = (reason: unknown) => rejections.push(reason);

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  redis.resume();
  await redis?.stop();
});
beforeEach(() => {
  rejections.length = 0;
  process.on("unhandledRejection", onRejection);
});
afterEach(async () => {
  redis.resume();
  for (const close of opened.splice(0).reverse()) await close();
  process.off("unhandledRejection", onRejection);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function client(timeoutMs = 1000) {
  const c = connect({ url: redis.url, timeoutMs });
  await waitUntilReady(c, 5000);
  opened.push(() => c.disconnect());
  return c;
}

/** An instance whose pub/sub never works (its subscriber points at a closed port). */
async function deafInstance(prefix: string) {
  const c = await client();
  const closedPort = await deadPort();
  const errors: Error[] = [];
  const feed = new RedisChangeFeed({
    client: c,
    prefix,
    every: () => ({ cancel: () => {} }),
    subscriberOptions: { port: closedPort, retryStrategy: () => null },
    onError: (e) => errors.push(e),
  });
  let resets = 0;
  feed.onReset(() => resets++);
  feed.start();
  opened.push(() => feed.stop());
  await feed.reconcile();
  const keys = new RedisKeyStore({ client: c, prefix, timeoutMs: 1000, feed });
  return { client: c, feed, keys, resets: () => resets };
}

async function restartEmpty(...clients: (Redis | Cluster)[]): Promise<void> {
  await redis.kill();
  await redis.restart();
  for (const c of clients) await waitUntilReady(c, 5000);
}

describe("Redis restarted empty with pub/sub dead the whole time", () => {
  it("both instances reset at their next reconcile, the one whose last read found no stream too", async () => {
    const a = await deafInstance("e1:");
    const b = await deafInstance("e1:");
    // Created on a after b's last reconcile (which found no stream); b looks it up and would
    // cache it; its message never reaches b.
    const { record } = await a.keys.create({ client: "acme", plan: "pro" });
    expect(await b.keys.lookup(record.hash)).toMatchObject({ id: record.id });
    await restartEmpty(a.client, b.client);
    expect(await b.keys.lookup(record.hash)).toBeUndefined();
    await a.feed.reconcile();
    await b.feed.reconcile();
    expect([a.resets(), b.resets()]).toEqual([1, 1]);
    await a.feed.reconcile();
    await b.feed.reconcile();
    expect([a.resets(), b.resets()]).toEqual([1, 1]);
  }, 20_000);

  it("a stream made and trimmed after the restart does not hide it", async () => {
    const a = await deafInstance("e2:");
    const b = await deafInstance("e2:");
    await restartEmpty(a.client, b.client);
    const writer = await client();
    for (let i = 0; i < 3; i++) await writer.xadd("e2:{rt}:changes", "*", "c", `{"k":"key","h":"n${i}"}`);
    await writer.xtrim("e2:{rt}:changes", "MAXLEN", 1);
    await b.feed.reconcile();
    expect(b.resets()).toBe(1);
  }, 20_000);

  it("an instance started after the restart: its epoch resets the older one, and it resets at the next restart", async () => {
    const a = await deafInstance("e3:");
    await restartEmpty(a.client);
    const c = await deafInstance("e3:"); // creates the new epoch before a reconciles
    await a.feed.reconcile();
    expect([a.resets(), c.resets()]).toEqual([1, 0]);
    await restartEmpty(a.client, c.client);
    await c.feed.reconcile();
    await a.feed.reconcile();
    expect([a.resets(), c.resets()]).toEqual([2, 1]);
    expect(await (await client()).pttl("e3:{rt}:epoch")).toBeGreaterThan(0);
  }, 30_000);
});

describe("no unhandled rejection when Redis fails under the feed", () => {
  async function subscribed(prefix: string) {
    const c = await client(100); // commandTimeout 1 s
    const errors: Error[] = [];
    const feed = new RedisChangeFeed({ client: c, prefix, onError: (e) => errors.push(e) });
    feed.start();
    opened.push(() => feed.stop());
    const channel = `${prefix}rt:changes`;
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const [, n] = (await redis.client.pubsub("NUMSUB", channel)) as [string, number];
      if (Number(n) > 0) break;
      await sleep(20);
    }
    const sub = (feed as unknown as { subscriber: Redis }).subscriber;
    return { feed, sub, errors };
  }

  /** Hangs Redis (SIGSTOP) just before the subscriber's next SUBSCRIBE goes out. */
  function hangAtNextSubscribe(sub: Redis): void {
    const send = sub.sendCommand.bind(sub);
    let armed = true;
    sub.sendCommand = ((command: { name: string }, stream?: unknown) => {
      if (armed && command.name === "subscribe") {
        armed = false;
        redis.pause();
      }
      return send(command as never, stream as never);
    }) as never;
  }

  it("a SUBSCRIBE after a reconnect that Redis never answers (hung right then) is reported, not thrown", async () => {
    const { sub, errors } = await subscribed("u1:");
    // The moment the subscriber is ready again, Redis hangs: the SUBSCRIBE sent then times out.
    hangAtNextSubscribe(sub);
    await redis.client.client("KILL", "TYPE", "pubsub");
    await sleep(1800); // past the 1 s commandTimeout
    redis.resume();
    await sleep(300);
    expect(rejections).toEqual([]);
    expect(errors.some((e) => /timed out/i.test(e.message))).toBe(true);
  }, 20_000);

  it("stop() while the SUBSCRIBE after a reconnect is pending, Redis killed and restarted meanwhile", async () => {
    const { feed, sub } = await subscribed("u2:");
    hangAtNextSubscribe(sub);
    await redis.client.client("KILL", "TYPE", "pubsub");
    await sleep(200);
    await feed.stop();
    redis.resume();
    await redis.kill();
    await feed.reconcile();
    await redis.restart();
    await sleep(1500);
    expect(rejections).toEqual([]);
  }, 20_000);
});
