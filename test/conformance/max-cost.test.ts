// A token budget under a route's max_cost (LimitCheck.need): admitted only if `need` units
// would be, taking only its cost; the same answer from check.lua and the in-process step, for
// every algorithm a token budget may use, with a calendar window among them.
import { describe, expect, it } from "vitest";
import type { LimitCheck, LimitSpec } from "../../src/limits/spec.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";
import { redisStores } from "../support/redis-stores.js";
import { freshKey } from "./suite.js";

const env = redisStores(10_000);
const T0 = Date.UTC(2026, 11, 15, 12);

const BUDGETS: LimitSpec[] = [
  { algorithm: "fixed_window", name: "mc.window", limit: 10, windowMs: 3_600_000, unit: "tokens" },
  {
    algorithm: "fixed_window",
    name: "mc.month",
    limit: 10,
    windowMs: 2_592_000_000,
    unit: "tokens",
    calendar: { unit: "month", tz: "Europe/Berlin" },
  },
  { algorithm: "sliding_window_counter", name: "mc.counter", limit: 10, windowMs: 3_600_000, unit: "tokens" },
  { algorithm: "token_bucket", name: "mc.bucket", burst: 10, intervalMs: 360_000, unit: "tokens" },
];

describe.each([
  ["memory", async () => new MemoryStore()],
  ["redis", () => env.newStore()],
] as const)("max_cost on the %s store", (_kind, newStore) => {
  it.each(BUDGETS.map((s) => [s.algorithm + (s.name === "mc.month" ? " (calendar)" : ""), s] as const))(
    "%s: fits `need`, takes the cost, and refuses once fewer than `need` are left",
    async (_name, spec) => {
      const store = await newStore();
      const key = freshKey(`max-cost-${spec.name}`);
      const check = (need?: number): LimitCheck[] => [
        need === undefined ? { key, spec, cost: 1 } : { key, spec, cost: 1, need },
      ];
      // 10 left, need 6: admitted, 9 left.
      const first = await store.check(check(6), { nowMs: T0 });
      expect(first.allowed).toBe(true);
      expect(first.outcomes[0]!.remaining).toBe(9);
      // A reported cost of 4 more: 5 left.
      await store.charge([{ key, spec, cost: 4 }], { nowMs: T0 });
      const refused = await store.check(check(6), { nowMs: T0 });
      expect(refused.allowed).toBe(false);
      expect(refused.outcomes[0]!.remaining).toBe(5);
      expect(refused.outcomes[0]!.retryAfterMs).toBeGreaterThan(0);
      // Refused: nothing taken. A request without max_cost still fits.
      const plain = await store.check(check(), { nowMs: T0 });
      expect(plain.allowed).toBe(true);
      expect(plain.outcomes[0]!.remaining).toBe(4);
    },
  );
});
