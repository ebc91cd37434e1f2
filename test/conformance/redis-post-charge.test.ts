// A post-charge of any size costs Redis work and memory bounded by the limit, not by the charge
// (issue 13, item 6), and the Lua and TypeScript sliding logs still decide identically.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LimitCheck, WindowSpec } from "../../src/limits/spec.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";
import { MAX_POST_CHARGE } from "../../src/proxy/post-charge.js";
import { redisStores } from "../support/redis-stores.js";
import { freshKey } from "./suite.js";

const env = redisStores(10_000);
const newStore = (timeoutMs?: number) => env.newStore(timeoutMs);

/** Microseconds Redis spent in scripts so far (EVALSHA and its EVAL fallback). */
async function scriptUsec(): Promise<number> {
  const info = await env.redis.client.info("commandstats");
  let usec = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=\d+,usec=(\d+)/g)) usec += Number(m[1]);
  return usec;
}

const HOURLY: WindowSpec = {
  algorithm: "sliding_window",
  name: "pc.sliding",
  limit: 100,
  windowMs: 3_600_000,
};
const T0 = 1_700_000_000_000;

describe("post-charges on a sliding window log", () => {
  it("a post-charge of 1,000,000 on a sliding window of 100/h is quick, bounded by the limit, and blocks for a full window", async () => {
    const store = await newStore();
    const key = freshKey("huge-charge");
    const checks: LimitCheck[] = [{ key, spec: HOURLY, cost: 1 }];
    expect((await store.check(checks, { nowMs: T0 })).allowed).toBe(true);

    const usecBefore = await scriptUsec();
    const started = performance.now();
    const charged = await store.charge([{ key, spec: HOURLY, cost: MAX_POST_CHARGE }], { nowMs: T0 + 10 });
    const wallMs = performance.now() - started;
    const redisMs = ((await scriptUsec()) - usecBefore) / 1000;
    const members = await env.redis.client.zcard(key);
    const bytes = Number(await env.redis.client.call("MEMORY", "USAGE", key));
    console.log(
      `1M post-charge: ${wallMs.toFixed(1)} ms wall, ${redisMs.toFixed(1)} ms in Redis, ${members} members, ${bytes} bytes`,
    );
    expect(wallMs).toBeLessThan(250);
    expect(redisMs).toBeLessThan(50);
    expect(charged).toEqual([{ remaining: 0, resetMs: HOURLY.windowMs }]);

    // The log never holds more than the limit; its memory is that of 100 members.
    expect(members).toBeLessThanOrEqual(HOURLY.limit);
    expect(bytes).toBeLessThan(16_384);

    // Blocked for a full window from the charge, then the whole limit is back.
    const denied = await store.check(checks, { nowMs: T0 + 20 });
    expect(denied.outcomes[0]).toEqual({
      allowed: false,
      remaining: 0,
      resetMs: HOURLY.windowMs - 10,
      retryAfterMs: HOURLY.windowMs - 10,
    });
    expect((await store.check(checks, { nowMs: T0 + 10 + HOURLY.windowMs - 1 })).allowed).toBe(false);
    expect(
      (await store.check([{ key, spec: HOURLY, cost: 100 }], { nowMs: T0 + 10 + HOURLY.windowMs })).allowed,
    ).toBe(true);
  });

  it("the memory store keeps the same bounded log and the same decisions", async () => {
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    const store = await newStore();
    const key = freshKey("huge-charge-both");
    const checks: LimitCheck[] = [{ key, spec: HOURLY, cost: 1 }];
    for (let i = 0; i < 30; i++) {
      expect(await store.check(checks, { nowMs: T0 + i })).toEqual(memory.checkSync(checks, T0 + i));
    }
    const charge = [{ key, spec: HOURLY, cost: MAX_POST_CHARGE }];
    const started = performance.now();
    expect(memory.chargeSync(charge, T0 + 100)).toEqual(await store.charge(charge, { nowMs: T0 + 100 }));
    expect(performance.now() - started).toBeLessThan(250);
    expect((memory.read(key, T0 + 100) as number[]).length).toBeLessThanOrEqual(HOURLY.limit);
    for (const t of [T0 + 101, T0 + 100 + HOURLY.windowMs - 1, T0 + 100 + HOURLY.windowMs]) {
      for (const cost of [1, 100, 101]) {
        const c = [{ key, spec: HOURLY, cost }];
        expect(await store.check(c, { nowMs: t }), `cost ${cost} at +${t - T0}`).toEqual(
          memory.checkSync(c, t),
        );
      }
    }
    await memory.close();
  });

  it("charges that trim the log at one timestamp keep exactly its newest units", async () => {
    // Limit 3: two units at T0, then two charges at T0 + 500. Exactly: the three newest units
    // are all from T0 + 500, so nothing fits before T0 + 500 + window, even once T0's have left.
    const spec: WindowSpec = { algorithm: "sliding_window", name: "pc.trim", limit: 3, windowMs: 1000 };
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    const store = await newStore();
    const key = freshKey("pc-trim");
    const steps: [string, number, number][] = [
      ["check", 0, 2],
      ["charge", 500, 2],
      ["charge", 500, 1],
      ["check", 1200, 1],
      ["check", 1499, 1],
      ["check", 1500, 3],
    ];
    for (const [kind, t, cost] of steps) {
      const c = [{ key, spec, cost }];
      const label = `${kind} ${cost} at +${t}`;
      if (kind === "charge")
        expect(await store.charge(c, { nowMs: T0 + t }), label).toEqual(memory.chargeSync(c, T0 + t));
      else expect(await store.check(c, { nowMs: T0 + t }), label).toEqual(memory.checkSync(c, T0 + t));
    }
    expect(await env.redis.client.zcard(key)).toBe(3);
    await memory.close();
  });

  it("decides exactly as the memory store for any mix of checks and charges, small or far past the limit", async () => {
    const store = await newStore();
    const step = fc.record({
      // Often 0: several checks and charges at one timestamp are where member names could clash.
      dtMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 900 })),
      kind: fc.constantFrom("check", "check", "check", "charge", "peek"),
      cost: fc.oneof(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 40 }),
        fc.constant(MAX_POST_CHARGE),
      ),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 100, max: 3000 }),
        fc.array(step, { minLength: 1, maxLength: 40 }),
        async (limit, windowMs, steps) => {
          const spec: WindowSpec = { algorithm: "sliding_window", name: "pc.prop", limit, windowMs };
          const memory = new MemoryStore({ sweepIntervalMs: 0 });
          const key = freshKey("pc-prop");
          let now = T0;
          for (const s of steps) {
            now += s.dtMs;
            const c = [{ key, spec, cost: s.cost }];
            if (s.kind === "charge") {
              expect(await store.charge(c, { nowMs: now })).toEqual(memory.chargeSync(c, now));
            } else if (s.kind === "peek") {
              expect(await store.peek(c, { nowMs: now })).toEqual(await memory.peek(c, { nowMs: now }));
            } else {
              // A check never costs more than the limit in practice (the pipeline caps a route's
              // cost); past it the answer is a denial either way.
              const check = [{ key, spec, cost: Math.min(s.cost, limit + 1) }];
              expect(await store.check(check, { nowMs: now })).toEqual(memory.checkSync(check, now));
            }
            expect(await env.redis.client.zcard(key)).toBeLessThanOrEqual(limit);
            expect(((memory.read(key, now) as number[] | null) ?? []).length).toBeLessThanOrEqual(limit);
          }
          await memory.close();
        },
      ),
      { numRuns: 60 },
    );
  });
});
