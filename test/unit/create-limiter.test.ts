import { describe, expect, it } from "vitest";
import {
  createLimiter,
  type LimitDefinition,
  LimitDefinitionError,
  MemoryStore,
  RedisStore,
  StoreUnavailableError,
  TollgateError,
  UnknownLimitError,
} from "../../src/index.js";
import { freePort } from "../support/ports.js";

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
    // Each @ts-expect-error is also a type test: `tsc --noEmit` fails if the type lets it through.
    // @ts-expect-error not a rate
    expect(() => createLimiter({ store, limits: { api: { rate: "5 per second", burst: 10 } } })).toThrow(
      /limit "api": rate: "5 per second" is not a rate/,
    );
    // @ts-expect-error a misspelt key
    expect(() => createLimiter({ store, limits: { api: { rate: "5/s", burts: 10 } } })).toThrow(
      'limit "api": unknown key "burts"; did you mean "burst"?',
    );
    // @ts-expect-error a leaky bucket needs its queue
    expect(() => createLimiter({ store, limits: { q: { algorithm: "leaky_bucket", rate: "5/s" } } })).toThrow(
      /limit "q": queue is missing/,
    );
    // @ts-expect-error not a limit at all
    expect(() => createLimiter({ store, limits: { n: 42 } })).toThrow(
      'limit "n": expected a limit such as { rate: "5/s", burst: 10 }, not number 42',
    );
    expect(() =>
      // @ts-expect-error an algorithm that does not exist
      createLimiter({ store, limits: { w: { algorithm: "sliding_windw", limit: 5, window: "1m" } } }),
    ).toThrow('algorithm: "sliding_windw" is not an algorithm; did you mean "sliding_window"?');
    expect(() =>
      // @ts-expect-error a key of another algorithm, once the algorithm is named
      createLimiter({ store, limits: { q: { algorithm: "leaky_bucket", rate: "5/s", queue: 1, burst: 2 } } }),
    ).toThrow(/burst does not apply to a leaky bucket/);

    let thrown: unknown;
    try {
      createLimiter({ store, limits: { api: { rate: "5/s", burst: 0 } } });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(LimitDefinitionError);
    expect(thrown).toBeInstanceOf(TollgateError);
    expect(thrown).toMatchObject({
      code: "TOLLGATE_INVALID_LIMIT",
      limit: "api",
      problems: ["burst must be at least 1"],
    });

    const limiter = createLimiter({ store, limits: { login: { rate: "5/s", burst: 10 } } });
    const unknown = limiter.check("a", { only: ["logn"] });
    await expect(unknown).rejects.toThrow('unknown limit "logn"; did you mean "login"?');
    await expect(unknown).rejects.toBeInstanceOf(UnknownLimitError);
    await expect(unknown).rejects.toMatchObject({ code: "TOLLGATE_UNKNOWN_LIMIT" });
  });

  it("types every YAML limit shape, one per algorithm", async () => {
    const limits = {
      bucket: { rate: "5/s", burst: 10, batch: 2 },
      quota: { limit: 100, window: "1h" },
      exact: { algorithm: "sliding_window", limit: 5, window: "15m" },
      counter: { algorithm: "sliding_window_counter", limit: 1000, window: "1m", shadow: true },
      fixed: { algorithm: "fixed_window", limit: 10, window: "1s" },
      none: { limit: 0 },
      queue: { algorithm: "leaky_bucket", rate: "10/s", queue: 5 },
      slots: { algorithm: "concurrency", max_in_flight: 2, lease: "30s" },
      free: { unlimited: true },
    } satisfies Record<string, LimitDefinition>;
    const limiter = createLimiter({ store: new MemoryStore({ sweepIntervalMs: 0 }), limits });
    const d = await limiter.check("alice", { only: ["free", "bucket"] });
    expect(d).toMatchObject({ allowed: true, limit: "bucket" });
    expect(d.limits.map((l) => l.name)).toEqual(["bucket"]); // an unlimited limit is never checked
    expect(await limiter.check("alice", { only: ["none"] })).toMatchObject({ allowed: false });
  });

  it("wraps a store that cannot answer into StoreUnavailableError, with the store's error as cause", async () => {
    // Nothing listens on this port: the store reports not ready, and a check fails fast.
    const store = new RedisStore({ url: `redis://127.0.0.1:${await freePort()}`, timeoutMs: 100 });
    try {
      expect(await store.waitUntilReady(200)).toBe(false);
      const limiter = createLimiter({ store, limits: { api: { rate: "5/s", burst: 10 } } });
      const err = await limiter.check("alice").then(
        () => expect.unreachable("a check against a closed port was decided"),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect(err).toMatchObject({
        code: "TOLLGATE_STORE_UNAVAILABLE",
        reason: "connection",
        message: "the limit store could not answer: it is not connected",
      });
      expect((err as Error).cause).toBeInstanceOf(Error);
    } finally {
      await store.close();
    }

    // release() too: the slot then frees itself after the lease.
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    memory.release = () => Promise.reject(new Error("Connection is closed."));
    const slots = createLimiter({
      store: memory,
      limits: { s: { algorithm: "concurrency", max_in_flight: 1 } },
    });
    const held = await slots.check("alice");
    if (!held.allowed) throw new Error("the first slot was refused");
    await expect(held.release()).rejects.toMatchObject({ code: "TOLLGATE_STORE_UNAVAILABLE" });
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
