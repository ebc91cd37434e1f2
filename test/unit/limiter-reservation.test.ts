// The limiter with an AI request's reservation (limits/limiter.ts, budget-reservation.ts): its
// budgets take it in the one check, a rate takes the route's cost, a money budget is not asked
// without one, and with ai.clamp a request its budgets cannot hold is lowered to what they can,
// from the store's answer or the deny cache's, its denial written only once it is refused.
import { describe, expect, it } from "vitest";
import type { CompiledPlan } from "../../src/config/compile.js";
import type { Caller } from "../../src/identity/caller.js";
import type { BudgetReservation } from "../../src/limits/budget-reservation.js";
import { compiledLimit } from "../../src/limits/compiled.js";
import { createGatewayLimiter } from "../../src/limits/gateway-limiter.js";
import { scopeBy } from "../../src/limits/key-by.js";
import type { PlannedLimit } from "../../src/limits/plan.js";
import type { LimitSpec } from "../../src/limits/spec.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";

const T0 = 1_699_999_200_000;
const tokens: LimitSpec = {
  algorithm: "fixed_window",
  name: "p.tokens",
  limit: 10_000,
  windowMs: 3_600_000,
  unit: "tokens",
};
const money: LimitSpec = {
  algorithm: "fixed_window",
  name: "p.money",
  limit: 1_000_000,
  windowMs: 3_600_000,
  unit: "usd",
};
const rate: LimitSpec = { algorithm: "fixed_window", name: "p.rate", limit: 100, windowMs: 3_600_000 };

const planned = (s: LimitSpec): PlannedLimit => ({
  ...compiledLimit(s, 0.5),
  by: scopeBy("caller"),
  tenantOnly: false,
});
const plan: CompiledPlan = {
  name: "p",
  limitsByRoute: new Map([["chat", [planned(tokens), planned(money), planned(rate)]]]),
  limits: [planned(tokens), planned(money), planned(rate)],
};
const route = { name: "chat", cost: 1, onFailure: "closed" as const, limits: [] };

function setup() {
  const now = () => T0;
  const store = new MemoryStore({ sweepIntervalMs: 0, now });
  const limiter = createGatewayLimiter({ store, prefix: "t:", denyCache: true, now });
  return { store, limiter };
}

const reservation = (over: Partial<BudgetReservation> = {}): BudgetReservation => ({
  output: 6000,
  choices: 1,
  minOutput: 100,
  input: 500,
  inputPico: 1_000_000, // 1 µ$ a token
  outputPico: 10_000_000, // 10 µ$ a token
  ...over,
});

describe("a reservation in the one check", () => {
  it("budgets take it, a rate the route's cost; without one a money budget is not asked", async () => {
    const { limiter } = setup();
    const caller: Caller = { kind: "client", id: "a", plan, tenant: undefined, ipKey: "192.0.2.1" };
    const d = await limiter.check(caller, route, undefined, reservation({ minOutput: undefined }));
    if (d.kind !== "allowed") throw new Error(d.kind);
    expect(d.checks.map((c) => [c.spec.name, c.cost])).toEqual([
      ["p.tokens", 6500],
      ["p.money", 60_500],
      ["p.rate", 1],
    ]);
    expect(d.output).toBe(6000);
    const plain = await limiter.check(caller, route);
    if (plain.kind !== "allowed") throw new Error(plain.kind);
    expect(plain.checks.map((c) => c.spec.name)).toEqual(["p.tokens", "p.rate"]);
  });

  it("clamp: lowered to what the budgets hold, from the store's answer and then from the deny cache's; refused below min_output", async () => {
    const { limiter, store } = setup();
    const caller: Caller = { kind: "client", id: "b", plan, tenant: undefined, ipKey: "192.0.2.2" };
    const first = await limiter.check(caller, route, undefined, reservation());
    expect(first).toMatchObject({ kind: "allowed", output: 6000 });
    // 3,500 tokens left: a request of 500 input is lowered to 3,000 output.
    const second = await limiter.check(caller, route, undefined, reservation());
    expect(second).toMatchObject({ kind: "allowed", output: 3000 });
    if (second.kind !== "allowed") return;
    expect(second.checks[0]!.cost).toBe(3500);
    // Nothing left: refused, and its denial written once.
    const third = await limiter.check(caller, route, undefined, reservation());
    expect(third.kind).toBe("denied");
    // Give 2,000 back: the deny cache forgets the key, and the next is lowered to fit again.
    await limiter.settle(second.checks, second.decidedAt, [-2000, 0, 0]);
    const fourth = await limiter.check(caller, route, undefined, reservation());
    expect(fourth).toMatchObject({ kind: "allowed", output: 1500 });
    await limiter.flushDenials();
    const log = await store.denials("t:{c:b}:denials");
    expect(log).toHaveLength(1);
    expect(log[0]!.limits).toEqual(["p.tokens"]);
  });

  it("a request refused by a rate is not lowered", async () => {
    const { limiter } = setup();
    const caller: Caller = { kind: "client", id: "c", plan, tenant: undefined, ipKey: "192.0.2.3" };
    for (let i = 0; i < 100; i++)
      await limiter.check(caller, route, undefined, reservation({ output: 1, input: 1 }));
    const refused = await limiter.check(caller, route, undefined, reservation({ output: 1, input: 1 }));
    expect(refused).toMatchObject({ kind: "denied" });
  });
});
