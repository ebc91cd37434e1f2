// `batch: N`: instances reserve tokens N at a time. Never more than the limit is admitted (tokens
// are taken from the store before they are granted); fewer may be, by at most what the other
// instances hold reserved. Two limiters on one store play two gateway instances.
import { describe, expect, it } from "vitest";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import type { Caller } from "../../src/identity/caller.js";
import { createGatewayLimiter } from "../../src/limits/gateway-limiter.js";
import type { LimitCheck, StoreDecision } from "../../src/limits/spec.js";
import type { CheckOptions } from "../../src/limits/stores/contract.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";

const yaml = (batch: string) => `
store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:1 }
clients: [{ id: hot, key: k, plan: p }]
plans:
  p: { global: { rate: 1/h, burst: 100${batch} } }
routes: [{ name: default, match: { path: / }, upstream: api }]
`;

function setup(batch: string) {
  const loaded = loadConfigText(yaml(batch), "gw.yaml", {});
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  const rt = compileRuntime(loaded.config, { file: "gw.yaml", version: "1" });
  const clock = { now: Date.now() };
  const now = () => clock.now;
  const store = new MemoryStore({ sweepIntervalMs: 0, now });
  let calls = 0;
  const counting = Object.assign(Object.create(store), {
    check: (checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> => {
      calls++;
      return store.check(checks, options);
    },
  });
  const plan = rt.plans.get("p")!;
  const caller: Caller = { kind: "client", id: "hot", plan, tenant: undefined, ipKey: "" };
  const route = rt.routeList[0]!;
  const instance = () => createGatewayLimiter({ store: counting, prefix: "t:", denyCache: false, now });
  const instances = [instance(), instance()];
  return { instances, caller, route, clock, calls: () => calls };
}

async function run(batch: string, requests: number) {
  const { instances, caller, route, clock, calls } = setup(batch);
  let admitted = 0;
  for (let i = 0; i < requests; i++) {
    clock.now++;
    const d = await instances[i % 2]!.check(caller, route);
    if (d.kind === "allowed") admitted++;
  }
  return { admitted, storeCalls: calls() };
}

describe("batch: N", () => {
  it("without batching: exactly the burst, one store call per request", async () => {
    expect(await run("", 150)).toEqual({ admitted: 100, storeCalls: 150 });
  });

  it("batch 10 over two instances: never more than the burst, at most 2 × 9 fewer, a store call per batch", async () => {
    const { admitted, storeCalls } = await run(", batch: 10", 150);
    expect(admitted).toBeLessThanOrEqual(100);
    expect(admitted).toBeGreaterThanOrEqual(100 - 2 * 9);
    // While tokens last, one store call per batch; past the limit every request asks (no deny
    // cache in this test).
    const whileAdmitting = await run(", batch: 10", 90);
    expect(whileAdmitting.admitted).toBe(90);
    expect(whileAdmitting.storeCalls).toBeLessThanOrEqual(11);
    console.log(
      `[batch 10, 2 instances] admitted ${admitted} of burst 100 (${storeCalls} store calls for 150 requests); ` +
        `90 requests: ${whileAdmitting.storeCalls} store calls`,
    );
  });

  it("refuses a batch that is no batch or larger than the bucket", () => {
    const problems = (b: string) => {
      const r = loadConfigText(yaml(b), "gw.yaml", {});
      return r.ok ? [] : r.problems.map((p) => p.message);
    };
    expect(problems(", batch: 1")).toEqual(["batch must be at least 2 (1 is no batching)"]);
    expect(problems(", batch: 500")).toEqual(["batch 500 is more than the bucket holds (100)"]);
  });
});
