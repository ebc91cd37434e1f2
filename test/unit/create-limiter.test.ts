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
    const limiter = createLimiter({ store, limits: { api: { rate: "5/s", burst: 10 } } });
    await expect(limiter.check("a", { only: ["nope"] })).rejects.toThrow('unknown limit "nope"');
  });
});
