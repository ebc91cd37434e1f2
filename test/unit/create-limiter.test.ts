import { describe, expect, it } from "vitest";
import { createLimiter, MemoryStore } from "../../src/index.js";

describe("createLimiter (the library surface)", () => {
  it("checks named limits for a key, atomically, with typed decisions", async () => {
    const now = 1_700_000_000_000;
    const store = new MemoryStore({ sweepIntervalMs: 0, now: () => now });
    const limiter = createLimiter({
      store,
      limits: {
        api: { rate: "5/s", burst: 10 },
        login: { algorithm: "sliding_window", limit: 2, window: "15m" },
      },
    });
    const first = await limiter.check("alice", { only: ["login"] });
    expect(first).toMatchObject({ allowed: true, remaining: 1, limit: "login" });
    await limiter.check("alice", { only: ["login"] });
    const denied = await limiter.check("alice");
    expect(denied.allowed).toBe(false);
    if (denied.allowed) return;
    expect(denied).toMatchObject({ limit: "login", violated: ["login"], retryAfterMs: 900_000 });
    // All or nothing: the denied call took nothing from "api".
    const api = await limiter.check("alice", { only: ["api"], cost: 10 });
    expect(api).toMatchObject({ allowed: true, remaining: 0 });
    // Another key is untouched.
    expect(await limiter.check("bob", { only: ["login"] })).toMatchObject({ allowed: true, remaining: 1 });
  });

  it("refuses a bad definition or an unknown limit with a precise message", async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    expect(() => createLimiter({ store, limits: { api: { rate: "5 per second", burst: 10 } } })).toThrow(
      /limit "api": rate: "5 per second" is not a rate/,
    );
    expect(() => createLimiter({ store, limits: { api: { rate: "5/s", burstt: 10 } as never } })).toThrow(
      /burstt/,
    );
    expect(() => createLimiter({ store, limits: { q: { algorithm: "leaky_bucket", rate: "5/s" } } })).toThrow(
      /limit "q": queue is missing/,
    );
    const limiter = createLimiter({ store, limits: { api: { rate: "5/s", burst: 10 } } });
    await expect(limiter.check("a", { only: ["nope"] })).rejects.toThrow('unknown limit "nope"');
  });

  it("tells a leaky bucket's caller how long to wait and hands back concurrency slots", async () => {
    let now = 1_700_000_000_000;
    const store = new MemoryStore({ sweepIntervalMs: 0, now: () => now });
    const limiter = createLimiter({
      store,
      limits: {
        queue: { algorithm: "leaky_bucket", rate: "5/s", queue: 1 },
        slots: { algorithm: "concurrency", max_in_flight: 1, lease: "30s" },
      },
    });
    const first = await limiter.check("alice", { only: ["queue"] });
    expect(first).toMatchObject({ allowed: true, delayMs: 0 });
    expect(await limiter.check("alice", { only: ["queue"] })).toMatchObject({ allowed: true, delayMs: 200 });
    expect(await limiter.check("alice", { only: ["queue"] })).toMatchObject({
      allowed: false,
      retryAfterMs: 200,
    });

    const held = await limiter.check("alice", { only: ["slots"] });
    expect(held.allowed).toBe(true);
    expect(await limiter.check("alice", { only: ["slots"] })).toMatchObject({
      allowed: false,
      violated: ["slots"],
    });
    if (held.allowed) await held.release();
    const again = await limiter.check("alice", { only: ["slots"] });
    expect(again.allowed).toBe(true);
    // Not released: the lease frees the slot after 30 s.
    now += 30_001;
    expect(await limiter.check("alice", { only: ["slots"] })).toMatchObject({ allowed: true });
  });
});
