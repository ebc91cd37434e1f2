// The breaker's state machine around a store that fails on demand: opens on the error rate,
// refuses instantly while open, half-opens after the cooldown, closes on a good probe. A denial
// is a decision, never a failure. Time is vitest's fake clock: opossum's cooldown and rolling
// window run on the timers it replaces, so nothing here waits on the wall clock.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { BreakerOpenError, storeFailureReason } from "../../src/errors.js";
import { type BreakerState, BreakerStore } from "../../src/limits/breaker.js";
import type { LimitCheck, StoreDecision } from "../../src/limits/spec.js";
import type { ChargedLimit, Store } from "../../src/limits/stores/contract.js";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

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
  async refund(): Promise<void> {}
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
      (c) => states.push(c.overall),
    );
    inner.failing = true;
    for (let i = 0; i < 5; i++) await expect(breaker.check(CHECKS)).rejects.toThrow("Connection is closed.");
    expect(breaker.state).toBe(2);
    const callsWhenOpened = inner.calls;
    // Refused at once: settled with no timer run (fake time does not move by itself).
    const refused = await breaker.check(CHECKS).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BreakerOpenError);
    expect(storeFailureReason(refused)).toBe("breaker_open");
    expect(inner.calls).toBe(callsWhenOpened);

    inner.failing = false;
    await vi.advanceTimersByTimeAsync(149);
    expect(breaker.state).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(breaker.state).toBe(1);
    await breaker.check(CHECKS); // the probe
    expect(breaker.state).toBe(0);
    expect(states).toEqual([2, 1, 0]);
    await breaker.close();
  });
});

/** Two shards by key prefix ("a:" and "b:"); either can be made to fail. */
class ShardedStore extends ScriptedStore {
  readonly failingShards = new Set<string>();
  readonly callsByShard = new Map<string, number>();
  shardOf(checks: readonly LimitCheck[]): string {
    return checks[0]!.key.slice(0, 1);
  }
  override async check(checks: readonly LimitCheck[]): Promise<StoreDecision> {
    const shard = this.shardOf(checks);
    this.callsByShard.set(shard, (this.callsByShard.get(shard) ?? 0) + 1);
    if (this.failingShards.has(shard)) throw new Error("Connection is closed.");
    return { allowed: true, outcomes: [{ allowed: true, remaining: 5, resetMs: 1000, retryAfterMs: 0 }] };
  }
}

const on = (key: string): LimitCheck[] => [{ ...CHECKS[0]!, key }];

describe("BreakerStore over a sharded store (Redis Cluster)", () => {
  it("a failing shard opens its own breaker; the other shard keeps being asked and answered", async () => {
    const inner = new ShardedStore();
    const changes: { shard: string; state: number; overall: number }[] = [];
    const breaker = new BreakerStore(
      inner,
      { errorRate: 0.5, minRequests: 5, windowMs: 10_000, cooldownMs: 10_000 },
      (c) => changes.push(c),
    );
    inner.failingShards.add("a");
    // Mostly traffic for the failing shard: one breaker over both would see 80 % errors.
    for (let i = 0; i < 20; i++) {
      await breaker.check(on(`a:${i}`)).catch(() => {});
      if (i % 4 === 0) expect((await breaker.check(on(`b:${i}`))).allowed).toBe(true);
    }
    expect(changes).toEqual([{ shard: "a", state: 2, overall: 2 }]);
    expect(breaker.state).toBe(2);
    expect(breaker.stateFor(on("a:x"))).toBe(2);
    expect(breaker.stateFor(on("b:x"))).toBe(0);

    const aCalls = inner.callsByShard.get("a");
    const refused = await breaker.check(on("a:late")).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BreakerOpenError);
    expect(inner.callsByShard.get("a")).toBe(aCalls);
    expect((await breaker.check(on("b:late"))).allowed).toBe(true);
    // A post-charge on the healthy shard goes through; on the open one it is refused.
    await expect(breaker.charge(on("b:x"))).resolves.toEqual([]);
    await expect(breaker.charge(on("a:x"))).rejects.toBeInstanceOf(BreakerOpenError);
    await breaker.close();
  });
});

describe("BreakerStore shard bookkeeping", () => {
  it("keeps at most 64 shards, forgetting closed ones before a failing one", async () => {
    const inner = new (class extends ShardedStore {
      override shardOf(checks: readonly LimitCheck[]): string {
        return checks[0]!.key.split(":")[0]!;
      }
    })();
    const breaker = new BreakerStore(inner, {
      errorRate: 0.5,
      minRequests: 5,
      windowMs: 10_000,
      cooldownMs: 10_000,
    });
    inner.failingShards.add("down");
    for (let i = 0; i < 5; i++) await breaker.check(on("down:x")).catch(() => {});
    expect(breaker.stateFor(on("down:x"))).toBe(2);
    // 70 healthy shards pass through (failovers renaming masters, say).
    for (let i = 0; i < 70; i++) expect((await breaker.check(on(`up${i}:x`))).allowed).toBe(true);
    expect(breaker.stateFor(on("down:x"))).toBe(2);
    expect(breaker.state).toBe(2);
    await expect(breaker.check(on("down:y"))).rejects.toBeInstanceOf(BreakerOpenError);
    await breaker.close();
  });
});

/** A Sentinel store: every check goes to the master it is on, which a failover changes. */
class SwitchingStore extends ScriptedStore {
  master = "10.0.0.1:6379";
  shardOf(): string {
    return this.master;
  }
}

describe("BreakerStore across a master switch", () => {
  it("the new master is asked at once with a closed breaker; forgetting the old one closes the gauge", async () => {
    const inner = new SwitchingStore();
    const overall: BreakerState[] = [];
    const breaker = new BreakerStore(
      inner,
      { errorRate: 0.5, minRequests: 5, windowMs: 10_000, cooldownMs: 5000 },
      (c) => overall.push(c.overall),
    );
    inner.failing = true;
    for (let i = 0; i < 5; i++) await expect(breaker.check(CHECKS)).rejects.toThrow();
    expect(breaker.state).toBe(2);
    await expect(breaker.check(CHECKS)).rejects.toBeInstanceOf(BreakerOpenError);
    // The sentinels promote a replica: no cooldown is waited out (fake time has not moved).
    inner.failing = false;
    inner.master = "10.0.0.2:6379";
    const calls = inner.calls;
    expect((await breaker.check(CHECKS)).allowed).toBe(false);
    expect(inner.calls).toBe(calls + 1);
    expect(breaker.state).toBe(2); // the old master's breaker is still open until forgotten
    breaker.forget("10.0.0.1:6379");
    expect(breaker.state).toBe(0);
    expect(overall).toEqual([2, 0]);
    await breaker.close();
  });
});
