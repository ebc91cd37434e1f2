// The breaker's state machine around a store that fails on demand: opens on the error rate,
// refuses instantly while open, half-opens after the cooldown, closes on a good probe. A denial
// is a decision, never a failure.
import { describe, expect, it } from "vitest";
import { BreakerOpenError, type BreakerState, BreakerStore } from "../../src/limits/breaker.js";
import { classifyStoreError } from "../../src/limits/limiter.js";
import type { LimitCheck, StoreDecision } from "../../src/limits/spec.js";
import type { ChargedLimit, Store } from "../../src/limits/store.js";
import { StoreTimeoutError } from "../../src/limits/stores/redis.js";

class ScriptedStore implements Store {
  readonly kind = "redis";
  failing = false;
  calls = 0;
  async check(_checks: readonly LimitCheck[]): Promise<StoreDecision> {
    this.calls++;
    if (this.failing) throw new Error("Connection is closed.");
    return {
      allowed: false,
      outcomes: [{ allowed: false, remaining: 0, resetMs: 1000, retryAfterMs: 1000 }],
    };
  }
  async charge(): Promise<ChargedLimit[]> {
    return [];
  }
  async release(): Promise<void> {}
  async renew(): Promise<void> {}
  async peek(): Promise<ChargedLimit[]> {
    return [];
  }
  async denials(): Promise<[]> {
    return [];
  }
  async topDenials(): Promise<[]> {
    return [];
  }
  async reset(): Promise<number> {
    return 0;
  }
  async recordDenials(): Promise<void> {}
  async ping(): Promise<void> {}
  isConnected(): boolean {
    return !this.failing;
  }
  async waitUntilReady(): Promise<boolean> {
    return true;
  }
  async close(): Promise<void> {}
}

const CHECKS: LimitCheck[] = [
  { key: "k", spec: { algorithm: "token_bucket", name: "x", burst: 1, intervalMs: 1000 }, cost: 1 },
];

describe("BreakerStore", () => {
  it("does not count denials as failures", async () => {
    const inner = new ScriptedStore();
    const breaker = new BreakerStore(inner, {
      errorRate: 0.5,
      minRequests: 5,
      windowMs: 10_000,
      cooldownMs: 100,
    });
    for (let i = 0; i < 50; i++) expect((await breaker.check(CHECKS)).allowed).toBe(false);
    expect(breaker.state).toBe(0);
    await breaker.close();
  });

  it("opens on the error rate, refuses without calling the store, then half-opens and closes", async () => {
    const inner = new ScriptedStore();
    const states: BreakerState[] = [];
    const breaker = new BreakerStore(
      inner,
      { errorRate: 0.5, minRequests: 5, windowMs: 10_000, cooldownMs: 150 },
      (s) => states.push(s),
    );
    inner.failing = true;
    for (let i = 0; i < 5; i++) await expect(breaker.check(CHECKS)).rejects.toThrow("Connection is closed.");
    expect(breaker.state).toBe(2);
    const callsWhenOpened = inner.calls;
    const started = performance.now();
    const refused = await breaker.check(CHECKS).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BreakerOpenError);
    expect(classifyStoreError(refused)).toBe("breaker_open");
    expect(performance.now() - started).toBeLessThan(5);
    expect(inner.calls).toBe(callsWhenOpened);

    inner.failing = false;
    await new Promise((r) => setTimeout(r, 200));
    expect(breaker.state).toBe(1);
    await breaker.check(CHECKS); // the probe
    expect(breaker.state).toBe(0);
    expect(states).toEqual([2, 1, 0]);
    await breaker.close();
  });
});

describe("store error classification", () => {
  it.each([
    [new StoreTimeoutError(100), "timeout"],
    [new Error("Stream isn't writeable and enableOfflineQueue options is false"), "connection"],
    [Object.assign(new Error("NOSCRIPT No matching script"), { name: "ReplyError" }), "script"],
    [new BreakerOpenError(), "breaker_open"],
  ] as const)("%s → %s", (err, reason) => expect(classifyStoreError(err)).toBe(reason));
});
