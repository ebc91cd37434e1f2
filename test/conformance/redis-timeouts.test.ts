// A check answered without the store's decision consumes nothing, then or later (issue 13,
// item 5): a check that timed out while Redis was paused must not be charged when Redis wakes
// and runs the script it had queued, and must leave no concurrency lease behind.
import { describe, expect, it } from "vitest";
import { StoreTimeoutError } from "../../src/errors.js";
import { nextLeaseId } from "../../src/limits/leases.js";
import type { ConcurrencySpec, LimitCheck, WindowSpec } from "../../src/limits/spec.js";
import { CHECK_SCRIPT } from "../../src/limits/stores/redis/scripts.js";
import type { RedisStore } from "../../src/limits/stores/redis/store.js";
import { redisStores } from "../support/redis-stores.js";
import { freshKey } from "./suite.js";

const env = redisStores(1000);
const newStore = (timeoutMs: number) => env.newStore(timeoutMs);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `done` holds (the late reply's give-back is asynchronous), or gives up. */
async function eventually(done: () => Promise<boolean>, ms = 3000): Promise<void> {
  const until = performance.now() + ms;
  while (!(await done())) {
    if (performance.now() > until) return;
    await sleep(20);
  }
}

const FIXED: WindowSpec = { algorithm: "fixed_window", name: "t.fixed", limit: 5, windowMs: 86_400_000 };
const SLOTS: ConcurrencySpec = { algorithm: "concurrency", name: "t.slots", maxInFlight: 5, leaseMs: 60_000 };

/** A request under a fixed window of 5 and a concurrency limit of 5, as the gateway builds it. */
function request(key: string): LimitCheck[] {
  return [
    { key, spec: FIXED, cost: 1 },
    { key: `${key}:slots`, spec: SLOTS, cost: 1, leaseId: nextLeaseId() },
  ];
}

/**
 * Pauses Redis for 0.6 s while four requests are checked one after another, each timing out,
 * then lets Redis run what it had queued.
 */
async function timeOutFourWhilePaused(store: RedisStore, key: string): Promise<void> {
  const started = performance.now();
  env.redis.pause();
  try {
    for (let i = 0; i < 4; i++) {
      const err = await store.check(request(key)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreTimeoutError);
    }
    await sleep(600 - (performance.now() - started));
  } finally {
    env.redis.resume();
  }
  // PING follows the queued scripts on the same connection: once it answers, they have run.
  await store.ping();
}

/** The next six requests: exactly the full limit (5) passes. */
async function nextSix(store: RedisStore, key: string): Promise<boolean[]> {
  const allowed: boolean[] = [];
  for (let i = 0; i < 6; i++) allowed.push((await store.check(request(key))).allowed);
  return allowed;
}

describe("a check the gateway gave up on consumes nothing", () => {
  it("checks that timed out while Redis was paused are not charged when it wakes, and hold no lease", async () => {
    const store = await newStore(100);
    const key = freshKey("paused");
    // One answered call first: the store learns Redis's clock from it.
    expect((await store.check(request(freshKey("warm-up")))).allowed).toBe(true);
    await timeOutFourWhilePaused(store, key);
    // The scripts ran past their deadline: they wrote nothing at all.
    expect(await env.redis.client.zcard(`${key}:slots`)).toBe(0);
    expect(await env.redis.client.exists(key)).toBe(0);
    expect(await nextSix(store, key)).toEqual([true, true, true, true, true, false]);
  });

  it("on the very first call (no clock learnt yet), a late allowed reply is given back", async () => {
    const store = await newStore(100);
    const key = freshKey("first-call");
    await timeOutFourWhilePaused(store, key);
    // These scripts had no deadline and allowed: the late replies are refunded, leases freed.
    await eventually(async () => (await env.redis.client.zcard(`${key}:slots`)) === 0);
    expect(await env.redis.client.zcard(`${key}:slots`)).toBe(0);
    await eventually(async () => (await env.redis.client.get(key))?.endsWith(" 0") ?? true);
    expect(await nextSix(store, key)).toEqual([true, true, true, true, true, false]);
  });

  it("a post-charge that timed out while Redis was paused is not recorded when it wakes either", async () => {
    const store = await newStore(100);
    const key = freshKey("charge-paused");
    const checks: LimitCheck[] = [{ key, spec: FIXED, cost: 1 }];
    expect((await store.check(checks)).allowed).toBe(true);
    env.redis.pause();
    try {
      const err = await store.charge([{ key, spec: FIXED, cost: 3 }]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreTimeoutError);
      await sleep(300);
    } finally {
      env.redis.resume();
    }
    await store.ping();
    // Reported as not recorded, and indeed not: the 4 units left are all there.
    expect((await store.peek(checks))[0]!.remaining).toBe(4);
  });

  it("check.lua past its deadline writes nothing and says so", async () => {
    const key = freshKey("expired");
    // One request of one fixed window of 5 a day: allowed, so written when decided.
    const args = (deadline: string) => [1, key, 1, deadline, 1, 2, 5, 86_400_000, 1, 1];
    const [seconds] = await env.redis.client.time();
    const past = String(Number(seconds) * 1000 - 1000);
    const reply = (await env.redis.client.call("EVAL", CHECK_SCRIPT, ...args(past))) as unknown[];
    expect(reply[1]).toBe(0);
    expect(reply).toHaveLength(2);
    expect(await env.redis.client.exists(key)).toBe(0);
    // With a deadline still ahead it decides and writes as usual.
    const future = String(Number(seconds) * 1000 + 60_000);
    const decided = (await env.redis.client.call("EVAL", CHECK_SCRIPT, ...args(future))) as unknown[];
    expect(decided[1]).toBe(1);
    expect(decided.slice(2, 5)).toEqual([1, 1, 4]);
    expect(await env.redis.client.exists(key)).toBe(1);
  });
});
