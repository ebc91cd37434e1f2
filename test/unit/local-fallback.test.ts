// on_failure: local decides with each limit's compiled local share, under the request's own keys.
import { describe, expect, it } from "vitest";
import type { CompiledPlan } from "../../src/config/compile.js";
import type { Caller } from "../../src/identity/caller.js";
import { compiledLimit } from "../../src/limits/compiled.js";
import { scopeBy } from "../../src/limits/key-by.js";
import { localChecks } from "../../src/limits/local-fallback.js";
import type { PlannedLimit } from "../../src/limits/plan.js";
import type { LimitCheck, LimitSpec } from "../../src/limits/spec.js";

const plan = { name: "p", limitsByRoute: new Map(), limits: [] } as CompiledPlan;
const solo: Caller = { kind: "client", id: "dev", plan, tenant: undefined, ipKey: "192.0.2.1" };

const hot: LimitSpec = { algorithm: "token_bucket", name: "p.hot", burst: 100, intervalMs: 10, batch: 10 };
const slots: LimitSpec = { algorithm: "concurrency", name: "p.slots", maxInFlight: 8, leaseMs: 1000 };
const shared: LimitSpec = { algorithm: "fixed_window", name: "p.tenant", limit: 40, windowMs: 1000 };
const planned = (spec: LimitSpec, tenantOnly = false): PlannedLimit => ({
  ...compiledLimit(spec, 0.25),
  by: scopeBy(tenantOnly ? "tenant" : "caller"),
  tenantOnly,
});

describe("local fallback checks", () => {
  it("use each limit's local share, its key and lease, and skip what does not bind the caller", () => {
    const limits = [planned(hot), planned(shared, true), planned(slots)];
    // The request's checks as the limiter built them (no tenant: no tenant limit), one of them
    // marked for a reservation refill.
    const checks: LimitCheck[] = [
      { key: "t:{c:dev}:p.hot", spec: hot, cost: 2, batch: 10 },
      { key: "t:{c:dev}:p.slots", spec: slots, cost: 2, leaseId: "L1" },
    ];
    const local = localChecks(limits, solo, checks);
    expect(local).toEqual([
      // The batch mark stays behind: the local share is not taken a batch at a time.
      { key: "t:{c:dev}:p.hot", spec: limits[0]!.local.spec, cost: 2 },
      { key: "t:{c:dev}:p.slots", spec: limits[2]!.local.spec, cost: 2, leaseId: "L1" },
    ]);
    expect(local[0]!.spec).toMatchObject({ burst: 25, intervalMs: 40 });
    expect(local[1]!.spec).toMatchObject({ maxInFlight: 2 });
  });
});
