// Per-response work as layered handlers: leases given back and the request ended once the
// upstream exchange is over; a post-charge made with the limiter of the request's own generation
// before the client sees the head.
import { describe, expect, it } from "vitest";
import { compiledLimit } from "../../src/limits/compiled.js";
import type { AllowedDecision, StoreResult } from "../../src/limits/decision.js";
import type { CompiledLimit } from "../../src/limits/plan.js";
import type { LimitSpec } from "../../src/limits/spec.js";
import { admit } from "../../src/proxy/admit.js";
import type { Admitted, RequestLimiter } from "../../src/proxy/context.js";
import { responseHandler } from "../../src/proxy/response-handlers.js";
import { contextFor, counter, fakeRequest, runtimeOf, type TestEnv, testEnv } from "./support/proxy-fakes.js";

const rt = runtimeOf(`
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
routes:
  - { name: default, match: { path: /api }, upstream: api, cost: 2 }
`);

const spec: LimitSpec = {
  algorithm: "fixed_window",
  name: "anonymous.default",
  limit: 100,
  windowMs: 60_000,
};
const limit: CompiledLimit = compiledLimit(spec, 1);

function admitted(env: TestEnv, limiter: RequestLimiter): Admitted {
  const ctx = contextFor(
    env,
    rt,
    fakeRequest({ url: "/api", headers: [["Host", "gw"]] }),
    undefined,
    limiter,
  );
  const a = admit(ctx, env);
  if (a !== ctx) throw new Error("fixture not admitted");
  ctx.decision = "allowed";
  return a as Admitted;
}

function decision(extra: Partial<AllowedDecision> = {}): AllowedDecision {
  return {
    kind: "allowed",
    applied: [{ limit, spec, outcome: { allowed: true, remaining: 90, resetMs: 30_000, retryAfterMs: 0 } }],
    checks: [{ key: "k", spec, cost: 2 }],
    delayMs: 0,
    ...extra,
  };
}

const flush = () => new Promise((r) => setImmediate(r));

describe("the response handlers", () => {
  it("end the request once the exchange is over: upstream time, status, the log line", async () => {
    const env = testEnv();
    const ctx = admitted(env, {
      check: async () => decision(),
      settle: async () => ({ ok: true, charged: [] }),
      postCharge: async () => ({ ok: true, charged: [] }),
    });
    const handler = responseHandler(env, ctx, null, false);
    expect(handler.onResponseHead({})).toBeNull();
    env.advance(40);
    handler.onDone({ status: 502, failure: "refused" });
    expect(ctx).toMatchObject({ status: 502, upstreamMs: 40, done: true });
    expect(env.inFlight.count).toBe(0);
    expect(await counter(env, "tollgate_upstream_errors_total", { upstream: "api", reason: "refused" })).toBe(
      1,
    );
    expect(env.lines.lines.map((l) => l.msg)).toEqual(["request"]);
  });

  it("give the leases back before the request is ended; a failed release is counted and logged", async () => {
    const env = testEnv();
    const ctx = admitted(env, {
      check: async () => decision(),
      settle: async () => ({ ok: true, charged: [] }),
      postCharge: async () => ({ ok: true, charged: [] }),
    });
    const order: string[] = [];
    const release = (): Promise<StoreResult> => {
      order.push(ctx.done ? "release after end" : "release");
      return Promise.resolve({ ok: false, reason: "timeout" });
    };
    responseHandler(env, ctx, decision({ release }), true).onDone({ status: 101 });
    expect(order).toEqual(["release"]);
    await flush();
    expect(await counter(env, "tollgate_store_errors_total", { reason: "timeout" })).toBe(1);
    expect(env.lines.lines.map((l) => l.msg)).toContain("concurrency lease not released; it will expire");
  });

  it("post-charge the cost beyond the route's with the request's limiter, then show what is left", async () => {
    const env = testEnv();
    const charges: [unknown, number][] = [];
    const limiter: RequestLimiter = {
      check: async () => decision(),
      settle: async () => ({ ok: true, charged: [] }),
      postCharge: async (checks, extra) => {
        charges.push([checks, extra]);
        return { ok: true, charged: [{ remaining: 83, resetMs: 30_000 }] };
      },
    };
    const ctx = admitted(env, limiter);
    const d = decision();
    // Reported no more than the route's cost (3): nothing to debit, nothing held.
    expect(responseHandler(env, ctx, d, false).onResponseHead({ "tollgate-cost": "2" })).toBeNull();
    const held = responseHandler(env, ctx, d, false).onResponseHead({ "tollgate-cost": "9" });
    expect(held).toBeInstanceOf(Promise);
    await held;
    expect(charges).toEqual([[d.checks, 7]]);
    expect(ctx.responseHeaders["ratelimit-remaining"]).toBe("83");
  });

  it("a post-charge the store did not record is counted and logged; the response still goes", async () => {
    const env = testEnv();
    const ctx = admitted(env, {
      check: async () => decision(),
      settle: async () => ({ ok: true, charged: [] }),
      postCharge: async () => ({ ok: false, reason: "connection" }),
    });
    await responseHandler(env, ctx, decision(), false).onResponseHead({ "tollgate-cost": "5" });
    expect(await counter(env, "tollgate_store_errors_total", { reason: "connection" })).toBe(1);
    expect(env.lines.lines[0]).toMatchObject({
      msg: "post-charge not recorded",
      units: 3,
      reason: "connection",
    });
  });

  it("never post-charge a tunnel, a local decision or an undecided request", () => {
    const env = testEnv();
    const limiter: RequestLimiter = {
      check: async () => decision(),
      settle: async () => ({ ok: true, charged: [] }),
      postCharge: () => {
        throw new Error("post-charged");
      },
    };
    const ctx = admitted(env, limiter);
    expect(responseHandler(env, ctx, decision(), true).onResponseHead({ "tollgate-cost": "9" })).toBeNull();
    expect(
      responseHandler(env, ctx, decision({ degraded: "timeout" }), false).onResponseHead({
        "tollgate-cost": "9",
      }),
    ).toBeNull();
    expect(responseHandler(env, ctx, null, false).onResponseHead({ "tollgate-cost": "9" })).toBeNull();
  });
});
