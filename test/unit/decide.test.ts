// The decide stage: exempt callers are not asked; anyone else is asked of the limiter of the
// request's own generation; a decision is recorded as its label, metrics and headers.
import { describe, expect, it } from "vitest";
import { compiledLimit } from "../../src/limits/compiled.js";
import type { AllowedDecision, AppliedLimit, LimitDecision } from "../../src/limits/decision.js";
import type { CompiledLimit } from "../../src/limits/plan.js";
import type { LimitSpec } from "../../src/limits/spec.js";
import { admit } from "../../src/proxy/admit.js";
import type { Admitted, RequestLimiter } from "../../src/proxy/context.js";
import { checkFailed, decide, nearLimit, observeCheck, recordDecision } from "../../src/proxy/decide.js";
import { contextFor, counter, fakeRequest, runtimeOf, type TestEnv, testEnv } from "./support/proxy-fakes.js";

const rt = runtimeOf(`
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
clients:
  - { id: vip, key: vip-key, plan: free }
  - { id: acme, key: acme-key, plan: free }
plans:
  free: { routes: { default: { rate: 1/s, burst: 10 } } }
routes:
  - { name: default, match: { path: /api }, upstream: api, on_failure: closed }
exempt: { clients: [vip] }
`);

function admitted(env: TestEnv, key: string, limiter?: RequestLimiter): Admitted {
  const ctx = contextFor(
    env,
    rt,
    fakeRequest({
      url: "/api",
      headers: [
        ["Host", "gw"],
        ["x-api-key", key],
      ],
    }),
    undefined,
    limiter,
  );
  const a = admit(ctx, env);
  if (a !== ctx) throw new Error("fixture not admitted");
  return a as Admitted;
}

const spec: LimitSpec = { algorithm: "token_bucket", name: "free.default", burst: 10, intervalMs: 1000 };
const limit: CompiledLimit = compiledLimit(spec, 1);
const appliedWith = (remaining: number, s: LimitSpec = spec): AppliedLimit => ({
  limit: s === spec ? limit : { ...limit, spec: s },
  spec: s,
  outcome: { allowed: true, remaining, resetMs: 1000, retryAfterMs: 0 },
});
const allowed = (extra: Partial<AllowedDecision> = {}): AllowedDecision => ({
  kind: "allowed",
  applied: [appliedWith(5)],
  checks: [],
  delayMs: 0,
  ...extra,
});

describe("decide", () => {
  it("does not ask about an exempt caller: decided at once, without a promise", () => {
    const env = testEnv();
    const ctx = admitted(env, "vip-key");
    expect(decide(ctx, env)).toEqual({ kind: "unlimited" });
  });

  it("asks the request's own limiter about its caller and route, and times the answer", async () => {
    const env = testEnv();
    const asked: unknown[] = [];
    const decision = allowed();
    const limiter: RequestLimiter = {
      check: async (caller, route) => {
        asked.push([caller, route]);
        return decision;
      },
      settle: async () => ({ ok: true, charged: [] }),
      postCharge: async () => ({ ok: true, charged: [] }),
    };
    const ctx = admitted(env, "acme-key", limiter);
    const pending = decide(ctx, env);
    expect(pending).toBeInstanceOf(Promise);
    expect(await pending).toBe(decision);
    expect(asked).toEqual([[ctx.caller, ctx.route]]);
    env.advance(2.5);
    observeCheck(ctx, env);
    expect(ctx.checkMs).toBe(2.5);
  });

  it("a limiter that throws (a bug) is answered as the store unreachable, under the route's policy", () => {
    const env = testEnv();
    const ctx = admitted(env, "acme-key");
    const d = checkFailed(ctx, env, new Error("bug"));
    expect(d).toMatchObject({ kind: "degraded", reason: "connection", policy: "closed" });
    expect(env.lines.lines[0]).toMatchObject({ msg: "limit check failed unexpectedly", request_id: "req-1" });
  });
});

describe("recordDecision", () => {
  const record = (decision: LimitDecision, key = "acme-key") => {
    const env = testEnv();
    const ctx = admitted(env, key);
    recordDecision(ctx, env, decision);
    return { env, ctx };
  };

  it("allowed: labelled, with the rate-limit headers of the request", () => {
    const { ctx } = record(allowed());
    expect(ctx.decision).toBe("allowed");
    expect(ctx.responseHeaders).toMatchObject({
      "x-request-id": "req-1",
      "ratelimit-limit": "10",
      "ratelimit-remaining": "5",
    });
    expect(ctx.responseHeaders["x-ratelimit-degraded"]).toBeUndefined();
  });

  it("allowed by the local fallback: degraded_local, said in a header and counted as a store error", async () => {
    const { ctx, env } = record(allowed({ degraded: "timeout" }));
    expect(ctx.decision).toBe("degraded_local");
    expect(ctx.responseHeaders["x-ratelimit-degraded"]).toBe("true");
    expect(await counter(env, "tollgate_store_errors_total", { reason: "timeout" })).toBe(1);
  });

  it("allowed past a shadow limit: shadow_limited", () => {
    expect(record(allowed({ shadowLimited: [appliedWith(0)] })).ctx.decision).toBe("shadow_limited");
  });

  it("counts a request that left less than 20 % of a limit as near the limit", async () => {
    const { env } = record(allowed({ applied: [appliedWith(1)] }));
    expect(await counter(env, "tollgate_near_limit_total", { route: "default" })).toBe(1);
    expect(nearLimit([appliedWith(2)])).toBe(false);
    expect(nearLimit([appliedWith(1, { ...spec, shadow: true })])).toBe(false);
  });

  it("denied: a sustained-denial sighting of the caller, a deny-cache count; its label is the 429's", async () => {
    const decision: LimitDecision = {
      kind: "denied",
      applied: [appliedWith(0)],
      violated: [appliedWith(0)],
      retryAfterMs: 100,
      local: true,
    };
    const { env, ctx } = record(decision);
    expect(await counter(env, "tollgate_local_denials_total")).toBe(1);
    expect(ctx.responseHeaders["ratelimit-limit"]).toBeUndefined();
  });

  it("degraded: open or closed, said in a header and counted", async () => {
    const open = record({ kind: "degraded", reason: "breaker_open", policy: "open", error: new Error("x") });
    expect(open.ctx.decision).toBe("degraded_open");
    expect(open.ctx.responseHeaders["x-ratelimit-degraded"]).toBe("true");
    expect(await counter(open.env, "tollgate_store_errors_total", { reason: "breaker_open" })).toBe(1);
    const closed = record({ kind: "degraded", reason: "script", policy: "closed", error: new Error("x") });
    expect(closed.ctx.decision).toBe("degraded_closed");
  });

  it("unlimited: exempt for an exempt caller, allowed for a route without limits", () => {
    expect(record({ kind: "unlimited" }, "vip-key").ctx.decision).toBe("exempt");
    expect(record({ kind: "unlimited" }).ctx.decision).toBe("allowed");
  });
});
