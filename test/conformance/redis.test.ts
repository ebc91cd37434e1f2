// The same suite against a real redis-server the test starts, plus the property that the Lua
// script and the TypeScript arithmetic decide identically for identical request sequences.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { StoreConnectionError, StoreReplyError } from "../../src/errors.js";
import type { LimitSpec, TokenBucketSpec } from "../../src/limits/spec.js";
import type { Lease } from "../../src/limits/stores/contract.js";
import { DENIAL_FLUSH_MS } from "../../src/limits/stores/denial-queue.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";
import { CHECK_SCRIPT, sha1 } from "../../src/limits/stores/redis/scripts.js";
import { RedisStore } from "../../src/limits/stores/redis/store.js";
import { redisStores } from "../support/redis-stores.js";
import { settlementConformance } from "./settlement-suite.js";
import { freshKey, storeConformance } from "./suite.js";

const env = redisStores(1000);
const newStore = (timeoutMs?: number) => env.newStore(timeoutMs);

const redisHarness = () => ({
  store: () => newStore(),
  pttl: async (key: string) => {
    const ms = await env.redis.client.pttl(key);
    return ms < 0 ? null : ms;
  },
  advance: (ms: number) => new Promise<void>((r) => setTimeout(r, ms)),
});
storeConformance("RedisStore", redisHarness);
settlementConformance("RedisStore", redisHarness);

/** One limit of each algorithm, with small random sizes, for the properties below. */
const specArb = fc.oneof(
  fc.record({ burst: fc.integer({ min: 1, max: 12 }), perSecond: fc.integer({ min: 1, max: 9 }) }).map(
    (s): LimitSpec => ({
      algorithm: "token_bucket",
      name: "p.tb",
      burst: s.burst,
      intervalMs: 1000 / s.perSecond,
    }),
  ),
  fc.record({ limit: fc.integer({ min: 1, max: 12 }), windowMs: fc.integer({ min: 100, max: 3000 }) }).map(
    (s): LimitSpec => ({
      algorithm: "fixed_window",
      name: "p.fw",
      limit: s.limit,
      windowMs: s.windowMs,
    }),
  ),
  fc.record({ limit: fc.integer({ min: 1, max: 12 }), windowMs: fc.integer({ min: 100, max: 3000 }) }).map(
    (s): LimitSpec => ({
      algorithm: "sliding_window",
      name: "p.sw",
      limit: s.limit,
      windowMs: s.windowMs,
    }),
  ),
  fc.record({ limit: fc.integer({ min: 1, max: 12 }), windowMs: fc.integer({ min: 100, max: 3000 }) }).map(
    (s): LimitSpec => ({
      algorithm: "sliding_window_counter",
      name: "p.swc",
      limit: s.limit,
      windowMs: s.windowMs,
    }),
  ),
  fc.record({ queue: fc.integer({ min: 0, max: 6 }), perSecond: fc.integer({ min: 1, max: 9 }) }).map(
    (s): LimitSpec => ({
      algorithm: "leaky_bucket",
      name: "p.lb",
      queue: s.queue,
      intervalMs: 1000 / s.perSecond,
    }),
  ),
  fc.record({ max: fc.integer({ min: 1, max: 4 }), leaseMs: fc.integer({ min: 100, max: 3000 }) }).map(
    (s): LimitSpec => ({
      algorithm: "concurrency",
      name: "p.cc",
      maxInFlight: s.max,
      leaseMs: s.leaseMs,
    }),
  ),
);

describe("RedisStore specifics", () => {
  it("fails with a StoreError whose reason says why: Redis's error reply, or no connection", async () => {
    const store = await newStore();
    const key = freshKey("refused");
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 3, intervalMs: 1000 };
    // Redis refuses the scripts (an ACL without them, as a misconfigured user would have).
    await env.redis.client.call("ACL", "SETUSER", "default", "-evalsha", "-eval");
    try {
      const refused = await store.check([{ key, spec, cost: 1 }]).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(StoreReplyError);
      expect((refused as StoreReplyError).cause).toMatchObject({ name: "ReplyError" });
    } finally {
      await env.redis.client.call("ACL", "SETUSER", "default", "+@all");
    }
    // A key of a kind no algorithm writes is healed by a check (lua/prelude.lua) but refused by
    // a read, which writes nothing.
    const listKey = freshKey("wrongtype");
    await env.redis.client.rpush(listKey, "not a bucket");
    expect(await store.peek([{ key: listKey, spec, cost: 0 }]).catch((e: unknown) => e)).toBeInstanceOf(
      StoreReplyError,
    );
    expect((await store.check([{ key: listKey, spec, cost: 1 }])).allowed).toBe(true);

    // A port nothing listens on: the client refuses every call at once (no offline queue).
    const down = new RedisStore({ url: "redis://127.0.0.1:1", timeoutMs: 200 });
    try {
      for (const call of [
        down.check([{ key, spec, cost: 1 }]),
        down.charge([{ key, spec, cost: 1 }]),
        down.release([{ key, leaseId: "l", leaseMs: 1000 }]),
        down.denials(`${key}:log`),
        down.ping(),
      ]) {
        const err = await (call as Promise<unknown>).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(StoreConnectionError);
        expect((err as StoreConnectionError).reason).toBe("connection");
      }
    } finally {
      await down.close();
    }
  });

  it("runs the script by EVALSHA once it is loaded", async () => {
    const store = await newStore();
    await store.check([
      {
        key: freshKey("sha"),
        spec: { algorithm: "token_bucket", name: "x", burst: 1, intervalMs: 1000 },
        cost: 1,
      },
    ]);
    const [loaded] = (await env.redis.client.script("EXISTS", sha1(CHECK_SCRIPT))) as number[];
    expect(loaded).toBe(1);
    const before = await commandCalls("evalsha");
    await store.check([
      {
        key: freshKey("sha"),
        spec: { algorithm: "token_bucket", name: "x", burst: 1, intervalMs: 1000 },
        cost: 1,
      },
    ]);
    expect(await commandCalls("evalsha")).toBe(before + 1);
  });

  it("coalesces the checks of one event-loop turn into one EVALSHA, each request still atomic", async () => {
    const store = await newStore();
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 5, intervalMs: 60_000 };
    const small: TokenBucketSpec = { algorithm: "token_bucket", name: "y", burst: 2, intervalMs: 60_000 };
    const shared = freshKey("batch-shared");
    const tight = freshKey("batch-tight");
    const before = (await commandCalls("evalsha")) + (await commandCalls("eval"));
    // 12 requests in one turn: each takes from `shared`, and the even ones also from `tight`.
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        store.check(
          i % 2 === 0
            ? [
                { key: shared, spec, cost: 1 },
                { key: tight, spec: small, cost: 1 },
              ]
            : [{ key: shared, spec, cost: 1 }],
        ),
      ),
    );
    expect((await commandCalls("evalsha")) + (await commandCalls("eval")) - before).toBe(1);
    // In order: 0 (both) ok, 1 ok, 2 (both) ok, 3 ok, 4 (both) denied by `tight` and takes
    // nothing from `shared`, 5 takes the 5th token of `shared`, the rest are denied.
    expect(results.map((r) => r.allowed)).toEqual([
      true,
      true,
      true,
      true,
      false,
      true,
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(results[4]!.outcomes.map((o) => o.allowed)).toEqual([true, false]);
    expect(results[4]!.outcomes[0]!.remaining).toBe(1); // 4 of 5 taken; request 4 took nothing
    expect(results[5]!.outcomes[0]!.remaining).toBe(0);
  });

  it("reads a batch's keys with one MGET and writes each key once; an allowed request sends nothing of its denial record", async () => {
    const store = await newStore();
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 100, intervalMs: 60_000 };
    const one: TokenBucketSpec = { algorithm: "token_bucket", name: "o", burst: 1, intervalMs: 60_000 };
    const shared = freshKey("once-shared");
    const logKey = `${shared}:log`;
    const denial = { logKey, topKey: `${shared}:top`, caller: "client:c", route: "r" };
    const counts = async () =>
      Object.fromEntries(
        await Promise.all(
          ["evalsha", "eval", "mget", "get", "set", "lpush", "zincrby"].map(async (c) => [
            c,
            await commandCalls(c),
          ]),
        ),
      ) as Record<string, number>;
    const before = await counts();
    const results = await Promise.all(
      Array.from({ length: 12 }, () => store.check([{ key: shared, spec, cost: 1 }], { denial })),
    );
    expect(results.every((r) => r.allowed)).toBe(true);
    expect(results.map((r) => r.outcomes[0]!.remaining)).toEqual([
      99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89, 88,
    ]);
    const after = await counts();
    const moved = Object.fromEntries(Object.keys(after).map((c) => [c, after[c]! - before[c]!]));
    // One script call (EVAL the first time a store runs it, EVALSHA after).
    expect(moved.evalsha! + moved.eval!).toBe(1);
    expect({ ...moved, evalsha: 0, eval: 0 }).toEqual({
      evalsha: 0,
      eval: 0,
      mget: 1,
      get: 0,
      set: 1,
      lpush: 0,
      zincrby: 0,
    });
    expect(await env.redis.client.pttl(shared)).toBeGreaterThan(0);
    expect(await env.redis.client.exists(logKey)).toBe(0);

    // A denial reaches the caller's log and the top list within a second, without a read.
    const tight = freshKey("once-tight");
    await store.check([{ key: tight, spec: one, cost: 1 }], { denial });
    expect((await store.check([{ key: tight, spec: one, cost: 1 }], { denial })).allowed).toBe(false);
    await new Promise((r) => setTimeout(r, DENIAL_FLUSH_MS + 300));
    expect(await env.redis.client.lrange(logKey, 0, -1)).toEqual([expect.stringMatching(/^\d+\tr\to$/)]);
    expect(await env.redis.client.zscore(`${shared}:top`, "client:c")).toBe("1");
  });

  it("keeps a bucket key's expiry while its TAT stays in one half-second step, never shorter than the TAT", async () => {
    const store = await newStore();
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 10, intervalMs: 100 };
    const key = freshKey("keep-expiry");
    // Decided at given times (a step starts at every multiple of 500 ms), close to the real clock
    // so that the key's real TTL reads as the decision's.
    const base = Math.ceil(Date.now() / 500) * 500 + 5000;
    const expiry = async () => Number(await env.redis.client.call("PEXPIRETIME", key));
    const at = async (offset: number, cost = 1) => {
      const d = await store.check([{ key, spec, cost }], { nowMs: base + offset });
      expect(d.allowed).toBe(true);
      const tat = Number(await env.redis.client.get(key));
      // The key outlives its TAT (the bucket full again), by at most the second of slack.
      const ttl = await env.redis.client.pttl(key);
      expect(ttl).toBeGreaterThan(tat - (base + offset) - 50);
      expect(ttl).toBeLessThanOrEqual(tat - (base + offset) + 1000);
      return expiry();
    };
    const first = await at(0); // TAT base + 100: step base/500, expiry at its next step's end
    expect(await at(100)).toBe(first); // TAT base + 200: the same step, the expiry kept
    expect(await at(150, 2)).toBe(first); // TAT base + 400
    const moved = await at(450); // TAT base + 550: the next step, a new expiry
    expect(moved).toBeGreaterThan(first);
    expect(await at(460)).toBe(moved);
    // A TAT two steps on (8 tokens at once) gets an expiry of its own, past it.
    expect(await at(470, 8)).toBeGreaterThan(moved + 400);

    // A key written by an earlier version of the script (time-to-full + 1 s, off the grid) keeps
    // its expiry while the new TAT stays in the step of the one it replaces, which that covers.
    const old = freshKey("keep-expiry-old");
    const now = base + 1970;
    await env.redis.client.set(old, String(base + 2000), "PX", 2000 - 1970 + 1000);
    const written = Number(await env.redis.client.call("PEXPIRETIME", old));
    expect((await store.check([{ key: old, spec, cost: 4 }], { nowMs: now })).allowed).toBe(true);
    expect(Number(await env.redis.client.get(old))).toBe(base + 2400);
    expect(Number(await env.redis.client.call("PEXPIRETIME", old))).toBe(written);
    expect(await env.redis.client.pttl(old)).toBeGreaterThan(2400 - 1970 - 50);
  });

  it("a window's key takes the expiry of its window, whatever the window it had before (a reload)", async () => {
    const store = await newStore();
    const key = freshKey("window-resized");
    // A start shared by a 2 s and an 8 s window.
    const base = Math.ceil(Date.now() / 8000) * 8000 + 8000;
    const short: LimitSpec = { algorithm: "fixed_window", name: "w", limit: 5, windowMs: 2000 };
    const long: LimitSpec = { algorithm: "fixed_window", name: "w", limit: 5, windowMs: 8000 };
    expect((await store.check([{ key, spec: short, cost: 1 }], { nowMs: base + 10 })).allowed).toBe(true);
    expect((await store.check([{ key, spec: long, cost: 4 }], { nowMs: base + 400 })).allowed).toBe(true);
    // The count must last until the 8 s window ends, not the 2 s one: 8,600 ms, plus the slack.
    expect(await env.redis.client.pttl(key)).toBeGreaterThan(8000 - 400 + 1000 - 100);
    const counter: LimitSpec = { algorithm: "sliding_window_counter", name: "w", limit: 5, windowMs: 8000 };
    expect((await store.check([{ key, spec: counter, cost: 0 }], { nowMs: base + 500 })).allowed).toBe(true);
    // A sliding counter needs its window and the next: 16,000 - 500 ms, plus the slack.
    expect(await env.redis.client.pttl(key)).toBeGreaterThan(16_000 - 500 + 1000 - 100);
  });

  it("a batch deciding one key by a cached and a sorted-set algorithm (a reload) leaves it an expiry", async () => {
    const store = await newStore();
    const key = freshKey("mixed-algorithms");
    const other = freshKey("mixed-algorithms-other");
    const bucket: TokenBucketSpec = { algorithm: "token_bucket", name: "m", burst: 100, intervalMs: 1 };
    const log: LimitSpec = { algorithm: "sliding_window", name: "m", limit: 5, windowMs: 1000 };
    const empty: TokenBucketSpec = { algorithm: "token_bucket", name: "e", burst: 1, intervalMs: 60_000 };
    const base = Math.ceil(Date.now() / 500) * 500 + 5000;
    const at = { nowMs: base + 10 };
    await store.check([{ key, spec: bucket, cost: 1 }], { nowMs: base });
    await store.check([{ key: other, spec: empty, cost: 1 }], at);
    const before = (await commandCalls("evalsha")) + (await commandCalls("eval"));
    // One batch: the bucket's write of the key, its TAT in the step of the one before (an
    // expiry to keep), and the sliding log over the same key (its step finds a string, deletes
    // it and starts afresh), denied by its other, empty limit: nothing recreates the key.
    const [kept, denied] = await Promise.all([
      store.check([{ key, spec: bucket, cost: 1 }], at),
      store.check(
        [
          { key, spec: log, cost: 1 },
          { key: other, spec: empty, cost: 1 },
        ],
        at,
      ),
    ]);
    expect((await commandCalls("evalsha")) + (await commandCalls("eval")) - before).toBe(1);
    expect(kept.allowed).toBe(true);
    expect(denied.allowed).toBe(false);
    // The bucket's state, with an expiry of its own: the end of the step after its TAT's.
    expect(await env.redis.client.get(key)).toBe(String(base + 11));
    const ttl = await env.redis.client.pttl(key);
    expect(ttl).toBeGreaterThan(500);
    expect(ttl).toBeLessThanOrEqual(1000);
  });

  it("sends the checks asked while a batch is in flight as one batch when it lands", async () => {
    const store = await newStore();
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 100, intervalMs: 60_000 };
    const key = freshKey("in-flight");
    const before = (await commandCalls("evalsha")) + (await commandCalls("eval"));
    const turn = () => new Promise((r) => setImmediate(r));
    env.redis.pause();
    try {
      const first = store.check([{ key, spec, cost: 1 }]);
      await turn(); // the first batch is written; Redis holds it
      // 30 more checks, each in a turn of its own, all while the first is unanswered.
      const rest: Promise<unknown>[] = [];
      for (let i = 0; i < 30; i++) {
        rest.push(store.check([{ key, spec, cost: 1 }]));
        await turn();
      }
      env.redis.resume();
      await Promise.all([first, ...rest]);
    } finally {
      env.redis.resume();
    }
    expect((await commandCalls("evalsha")) + (await commandCalls("eval")) - before).toBe(2);
    const last = await store.check([{ key, spec, cost: 1 }]);
    expect(last.outcomes[0]!.remaining).toBe(100 - 32);
  });

  it("a hung reply never holds back the next batch once it is past its deadline", async () => {
    const store = await newStore(150);
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 100, intervalMs: 60_000 };
    const key = freshKey("hung");
    env.redis.pause();
    try {
      const hung = store.check([{ key, spec, cost: 1 }]);
      await expect(hung).rejects.toThrow(/did not answer|timed out|timeout/i);
      // Redis still holds the first batch; the next check gets its own deadline, not a queue.
      const started = performance.now();
      const err = await store.check([{ key, spec, cost: 1 }]).catch((e: Error) => e);
      expect(err).toBeInstanceOf(Error);
      expect(performance.now() - started).toBeLessThan(150 + 100);
    } finally {
      env.redis.resume();
    }
    const started = performance.now();
    expect((await store.check([{ key, spec, cost: 1 }])).allowed).toBe(true);
    expect(performance.now() - started).toBeLessThan(100);
  });

  it("a reply that arrives while the event loop lags past the deadline still counts", async () => {
    const store = await newStore(50);
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 5, intervalMs: 60_000 };
    const key = freshKey("lag");
    // The loop is busy for three deadlines right after the call is written; Redis answers in
    // the meantime. Timers run before socket reads: the reply must still win.
    const lag = async () => {
      await new Promise((r) => setImmediate(r));
      const until = performance.now() + 150;
      while (performance.now() < until) {}
    };
    const check = store.check([{ key, spec, cost: 1 }]);
    await lag();
    expect((await check).allowed).toBe(true);
    // The same for the calls bounded by withDeadline (the admin API's read).
    const peek = store.peek([{ key, spec, cost: 0 }]);
    await lag();
    expect((await peek)[0]!.remaining).toBe(4);
  });

  it("recovers from an empty script cache (NOSCRIPT) transparently", async () => {
    const store = await newStore();
    const spec: TokenBucketSpec = { algorithm: "token_bucket", name: "x", burst: 3, intervalMs: 1000 };
    const key = freshKey("noscript");
    expect((await store.check([{ key, spec, cost: 1 }])).allowed).toBe(true);
    await env.redis.client.script("FLUSH");
    expect((await store.check([{ key, spec, cost: 1 }])).outcomes[0]!.remaining).toBe(1);
  });

  it("keys carry the caller's hash tag and a TTL", async () => {
    const store = await newStore();
    const key = freshKey("tag");
    await store.check([
      { key, spec: { algorithm: "token_bucket", name: "x", burst: 5, intervalMs: 1000 }, cost: 1 },
    ]);
    expect(key).toMatch(/\{c:[^}]+\}/);
    const ttl = await env.redis.client.pttl(key);
    expect(ttl).toBeGreaterThan(1000);
    expect(ttl).toBeLessThanOrEqual(2000);
  });

  it("decides exactly as the memory store for any request sequence, for every algorithm", async () => {
    const redisStore = await newStore();
    const step = fc.record({
      dtMs: fc.integer({ min: 0, max: 700 }),
      cost: fc.integer({ min: 1, max: 4 }),
      which: fc.integer({ min: 0, max: 5 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(specArb, { minLength: 3, maxLength: 3 }),
        fc.array(step, { minLength: 1, maxLength: 30 }),
        async (specs, steps) => {
          const memory = new MemoryStore({ sweepIntervalMs: 0 });
          const keys = specs.map((_, i) => freshKey(`prop${i}`));
          let now = 1_700_000_000_000;
          let leaseSeq = 0;
          const held: Lease[] = [];
          for (const s of steps) {
            now += s.dtMs;
            if (s.which === 4) {
              // A post-charge; the decisions that follow must still agree, and so must what
              // each store reports after it.
              const charge = [{ key: keys[0]!, spec: specs[0]!, cost: s.cost * 2, leaseId: "charge" }];
              expect(await redisStore.charge(charge, { nowMs: now })).toEqual(memory.chargeSync(charge, now));
              continue;
            }
            if (s.which === 5) {
              // A request ends: its leases go back (releases use each store's own clock only to
              // skip expired keys, which the next check drops anyway).
              const lease = held.splice(s.cost % Math.max(1, held.length), 1);
              await redisStore.release(lease);
              memory.releaseSync(lease);
              continue;
            }
            // One limit, or several together, to exercise all-or-nothing across algorithms too.
            const idx = s.which === 3 ? [0, 1, 2] : [s.which];
            const checks = idx.map((i) => ({
              key: keys[i]!,
              spec: specs[i]!,
              cost: s.cost,
              leaseId: specs[i]!.algorithm === "concurrency" ? `lease-${++leaseSeq}` : undefined,
              // Some token-bucket checks take a batch for an instance's reservation.
              batch:
                specs[i]!.algorithm === "token_bucket" && s.dtMs % 3 === 0
                  ? s.cost + (s.dtMs % 7)
                  : undefined,
            }));
            const fromRedis = await redisStore.check(checks, { nowMs: now });
            const fromMemory = memory.checkSync(checks, now);
            expect(fromRedis).toEqual(fromMemory);
            if (fromRedis.allowed) {
              for (const c of checks) {
                if (c.leaseId && c.spec.algorithm === "concurrency") {
                  held.push({ key: c.key, leaseId: c.leaseId, leaseMs: c.spec.leaseMs });
                }
              }
            }
          }
          await memory.close();
        },
      ),
      { numRuns: 60 },
    );
  });

  it("decides a batch exactly as the memory store decides its requests one after another, a key repeated or not", async () => {
    // The requests of one event-loop turn go to Redis as one check.lua call, whose cache reads
    // each key once and writes it once at the end: a later request must see what an earlier
    // one of the same batch took, as if each had been its own call.
    const redisStore = await newStore();
    const request = fc.record({
      limits: fc.subarray([0, 1, 2], { minLength: 1 }),
      cost: fc.integer({ min: 1, max: 3 }),
      atMs: fc.integer({ min: 0, max: 50 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(specArb, { minLength: 3, maxLength: 3 }),
        fc.array(
          fc.record({
            dtMs: fc.integer({ min: 0, max: 900 }),
            batch: fc.array(request, { minLength: 1, maxLength: 12 }),
          }),
          {
            minLength: 1,
            maxLength: 6,
          },
        ),
        async (specs, turns) => {
          const memory = new MemoryStore({ sweepIntervalMs: 0 });
          const keys = specs.map((_, i) => freshKey(`batchprop${i}`));
          let now = 1_700_000_000_000;
          let leaseSeq = 0;
          for (const turn of turns) {
            now += turn.dtMs;
            // Each request at or after the one before it, as Redis's clock runs within a batch.
            const requests = turn.batch.map((r) => {
              now += r.atMs;
              return {
                nowMs: now,
                checks: r.limits.map((i) => ({
                  key: keys[i]!,
                  spec: specs[i]!,
                  cost: r.cost,
                  leaseId: specs[i]!.algorithm === "concurrency" ? `lease-${++leaseSeq}` : undefined,
                })),
              };
            });
            const before = await commandCalls("evalsha");
            const fromRedis = await Promise.all(
              requests.map((r) => redisStore.check(r.checks, { nowMs: r.nowMs })),
            );
            // One call for the whole turn (EVAL the first time the store runs the script).
            expect((await commandCalls("evalsha")) - before).toBeLessThanOrEqual(1);
            const fromMemory = requests.map((r) => memory.checkSync(r.checks, r.nowMs));
            expect(fromRedis).toEqual(fromMemory);
          }
          await memory.close();
        },
      ),
      { numRuns: 40 },
    );
  });

  it("decides calendar windows exactly as the memory store, across period ends and daylight-saving days", async () => {
    const redisStore = await newStore();
    const specArb = fc
      .record({
        limit: fc.integer({ min: 1, max: 12 }),
        unit: fc.constantFrom("day" as const, "week" as const, "month" as const),
        tz: fc.constantFrom("UTC", "America/New_York", "Europe/Berlin", "America/Santiago"),
      })
      .map(
        (s): LimitSpec => ({
          algorithm: "fixed_window",
          name: `p.cal.${s.unit}`,
          limit: s.limit,
          windowMs: 86_400_000,
          calendar: { unit: s.unit, tz: s.tz },
        }),
      );
    // Steps of up to 8 hours from the last day of October 2026 (Berlin falls back on the 25th,
    // New York on 1 November, and a month ends), some landing exactly on a boundary.
    const step = fc.record({
      dtMs: fc.oneof(fc.integer({ min: 0, max: 8 * 3_600_000 }), fc.constant(0)),
      cost: fc.integer({ min: 1, max: 4 }),
      charge: fc.boolean(),
      snap: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(specArb, fc.array(step, { minLength: 1, maxLength: 25 }), async (spec, steps) => {
        const memory = new MemoryStore({ sweepIntervalMs: 0 });
        const key = freshKey("prop-cal");
        let now = Date.UTC(2026, 9, 24, 12);
        for (const s of steps) {
          now += s.dtMs;
          // Land on the end of the current period, or a millisecond before it.
          if (s.snap) {
            const [view] = await memory.peek([{ key, spec, cost: 0 }], { nowMs: now });
            now += Math.max(0, view!.resetMs - (s.cost % 2));
          }
          const checks = [{ key, spec, cost: s.cost }];
          if (s.charge) {
            expect(await redisStore.charge(checks, { nowMs: now })).toEqual(memory.chargeSync(checks, now));
            continue;
          }
          expect(await redisStore.check(checks, { nowMs: now })).toEqual(memory.checkSync(checks, now));
        }
        await memory.close();
      }),
      { numRuns: 60 },
    );
  });
});

async function commandCalls(command: string): Promise<number> {
  const info = await env.redis.client.info("commandstats");
  const m = new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info);
  return m ? Number(m[1]) : 0;
}
