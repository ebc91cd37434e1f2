// The respond stage, driven with fake responses: every answer the gateway gives itself, from the
// problem table, and the one log line and count each request ends with.
import { describe, expect, it } from "vitest";
import { compiledLimit } from "../../src/limits/compiled.js";
import type { AppliedLimit, DeniedDecision } from "../../src/limits/decision.js";
import type { CompiledLimit, LimitFacts } from "../../src/limits/plan.js";
import type { LimitSpec } from "../../src/limits/spec.js";
import { Refusal } from "../../src/proxy/context.js";
import { complete, failed, refuse, tooMany, unavailable } from "../../src/proxy/respond.js";
import {
  contextFor,
  counter,
  type FakeResponse,
  fakeRequest,
  fakeResponse,
  NOW,
  runtimeOf,
  testEnv,
} from "./support/proxy-fakes.js";

const yaml = (requests: boolean) => `
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
log: { requests: ${requests} }
headers: [draft, ietf, legacy]
routes:
  - { name: default, match: { path: /api }, upstream: api }
`;
const rt = runtimeOf(yaml(true));

function setup(runtime = rt) {
  const env = testEnv();
  const res = fakeResponse();
  const ctx = contextFor(env, runtime, fakeRequest({ url: "/api" }), res);
  ctx.path = "/api";
  ctx.routeName = "default";
  return { env, res, ctx };
}

function body(res: FakeResponse) {
  return res.json();
}

const tokenBucket: LimitSpec = {
  algorithm: "token_bucket",
  name: "free.global",
  burst: 10,
  intervalMs: 1000,
};
const compiled: CompiledLimit = compiledLimit(tokenBucket, 0.5);

function applied(spec: LimitSpec, remaining: number, limit: LimitFacts = compiled): AppliedLimit {
  return { limit, spec, outcome: { allowed: false, remaining, resetMs: 2500, retryAfterMs: 1200 } };
}

describe("a refused request's unread body", () => {
  const refusedWith = (headers: [string, string][]) => {
    const env = testEnv();
    const res = fakeResponse();
    const req = fakeRequest({ url: "/api", method: "POST", headers: [["Host", "gw.test"], ...headers] });
    const ctx = contextFor(env, rt, req, res);
    refuse(env, ctx, new Refusal("no_route", "no_route", "no route matches POST /api"));
    return res;
  };

  it("closes the connection with the answer past 64 KiB announced, or chunked", () => {
    for (const headers of [
      [["Content-Length", String(64 * 1024 + 1)]],
      [["Transfer-Encoding", "chunked"]],
    ] as [string, string][][]) {
      const res = refusedWith(headers);
      expect(res.headers.connection, JSON.stringify(headers)).toBe("close");
      expect(res.shouldKeepAlive).toBe(false);
    }
  });

  it("keeps it for a short body, or none", () => {
    for (const headers of [[["Content-Length", String(64 * 1024)]], [["Content-Length", "0"]], []] as [
      string,
      string,
    ][][]) {
      const res = refusedWith(headers);
      expect(res.headers.connection, JSON.stringify(headers)).toBeUndefined();
      expect(res.shouldKeepAlive).toBe(true);
      // A body still to come is given DRAIN_MAX_MS from the answer's end; none, nothing.
      expect(res.awaited).toEqual(headers.length && headers[0]![1] !== "0" ? ["finish"] : []);
    }
  });
});

describe("refuse", () => {
  it("answers the refusal's problem with the request id and its headers, then counts and logs it", async () => {
    const { env, res, ctx } = setup();
    refuse(env, ctx, new Refusal("no_route", "no_route", "no route matches GET /x", { connection: "close" }));
    expect(res.statusCode).toBe(404);
    expect(res.headers).toMatchObject({
      "content-type": "application/problem+json",
      "x-request-id": "req-1",
      connection: "close",
    });
    expect(body(res)).toEqual({
      type: "https://tollgate.dev/problems/no-route",
      title: "Not Found",
      status: 404,
      detail: "no route matches GET /x",
    });
    expect(ctx).toMatchObject({ decision: "no_route", status: 404, done: true });
    expect(env.inFlight.count).toBe(0);
    expect(await counter(env, "tollgate_requests_total", { route: "default", decision: "no_route" })).toBe(1);
    expect(env.lines.lines).toEqual([
      expect.objectContaining({
        msg: "request",
        request_id: "req-1",
        method: "GET",
        path: "/api",
        route: "default",
        caller_kind: null,
        caller_id: null,
        decision: "no_route",
        status: 404,
        duration_ms: 0,
      }),
    ]);
  });

  it("a throttled credential: 429 quota-exceeded with Retry-After and retry_after_seconds", () => {
    const { env, res, ctx } = setup();
    refuse(env, ctx, new Refusal("quota_exceeded", "auth_throttled", "too many", undefined, 40));
    expect(res.statusCode).toBe(429);
    expect(res.headers["retry-after"]).toBe("40");
    expect(body(res)).toEqual({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Too Many Requests",
      status: 429,
      detail: "too many",
      retry_after_seconds: 40,
    });
    expect(ctx.decision).toBe("auth_throttled");
  });
});

describe("tooMany", () => {
  const denied = (violated: AppliedLimit[], extra: Partial<DeniedDecision> = {}): DeniedDecision => ({
    kind: "denied",
    applied: violated,
    violated,
    retryAfterMs: 1200,
    ...extra,
  });

  it("answers 429 with what denied it, Retry-After, and the rate-limit headers of every style", async () => {
    const { env, res, ctx } = setup();
    tooMany(env, ctx, denied([applied(tokenBucket, 0)]));
    expect(res.statusCode).toBe(429);
    expect(body(res)).toEqual({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Too Many Requests",
      status: 429,
      detail: 'Rate limit exceeded: "free.global" allows 10 requests, refilled over 10s. Retry in 2 s.',
      "violated-policies": ["free.global"],
      retry_after_seconds: 2,
    });
    expect(res.headers).toMatchObject({
      "x-request-id": "req-1",
      "retry-after": "2",
      "ratelimit-limit": "10",
      "ratelimit-remaining": "0",
      "ratelimit-reset": "3",
      "ratelimit-policy": '"free.global";q=10;w=10',
      ratelimit: '"free.global";r=0;t=3',
      "x-ratelimit-limit": "10",
      "x-ratelimit-reset": String(Math.ceil((NOW + 2500) / 1000)),
    });
    expect(ctx.decision).toBe("limited");
    expect(await counter(env, "tollgate_requests_total", { decision: "limited" })).toBe(1);
  });

  it("describes a local share by what denied, while this instance decides alone", () => {
    const { env, res, ctx } = setup();
    tooMany(env, ctx, denied([applied(compiled.local.spec, 0, compiled.local)], { degraded: "connection" }));
    expect(body(res).detail).toBe(
      'Rate limit exceeded: "free.global" allows 5 requests, refilled over 10s. Retry in 2 s.',
    );
    expect(res.headers["ratelimit-limit"]).toBe("5");
  });

  it("joins several violated limits, and never shows a shadow limit in the headers", () => {
    const { env, res, ctx } = setup();
    const shadow: LimitSpec = { ...tokenBucket, name: "free.trial", shadow: true };
    const both = [applied(tokenBucket, 0), { ...applied(shadow, 0), limit: { ...compiled, spec: shadow } }];
    tooMany(env, ctx, denied(both));
    expect(body(res)["violated-policies"]).toEqual(["free.global", "free.trial"]);
    expect(res.headers["ratelimit-policy"]).toBe('"free.global";q=10;w=10');
  });
});

describe("unavailable", () => {
  it.each([
    ["timeout", "the limit store did not answer in time"],
    ["connection", "the limit store is unreachable"],
    ["script", "the limit store refused the check"],
    ["breaker_open", "the limit store is failing and is not being asked for a while"],
  ] as const)("%s: 503 temporary-reduced-capacity, retry in a second", (reason, why) => {
    const { env, res, ctx } = setup();
    unavailable(env, ctx, reason);
    expect(res.statusCode).toBe(503);
    expect(res.headers["retry-after"]).toBe("1");
    expect(body(res)).toEqual({
      type: "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",
      title: "Service Unavailable",
      status: 503,
      detail: `Rate limits cannot be checked right now (${why}), and this route fails closed. Retry shortly.`,
      retry_after_seconds: 1,
    });
    expect(ctx.decision).toBe("degraded_closed");
  });
});

describe("failed", () => {
  it("answers 500 with the request id only, not headers of an answer never given", () => {
    const { env, res, ctx } = setup();
    ctx.responseHeaders["ratelimit-limit"] = "10";
    failed(env, ctx);
    expect(res.statusCode).toBe(500);
    expect(res.headers["ratelimit-limit"]).toBeUndefined();
    expect(res.headers["x-request-id"]).toBe("req-1");
    expect(body(res)).toMatchObject({ type: "https://tollgate.dev/problems/internal-error", status: 500 });
    expect(ctx.decision).toBe("internal_error");
  });

  it("cuts a response whose head was already sent", () => {
    const { env, res, ctx } = setup();
    res.headersSent = true;
    failed(env, ctx);
    expect(res.destroyed).toBe(true);
    expect(env.inFlight.count).toBe(0);
  });
});

describe("complete", () => {
  it("ends a request once: counted once, logged once, out of the in-flight count once", async () => {
    const { env, ctx } = setup();
    ctx.caller = { kind: "anonymous", plan: undefined, ipKey: "203.0.113.7" };
    ctx.status = 200;
    ctx.checkMs = 0.5;
    ctx.upstreamMs = 12.34;
    env.advance(15.678);
    complete(env, ctx);
    complete(env, ctx);
    expect(env.inFlight.count).toBe(0);
    expect(await counter(env, "tollgate_requests_total", { decision: "allowed" })).toBe(1);
    expect(env.lines.lines).toHaveLength(1);
    expect(env.lines.lines[0]).toMatchObject({
      caller_kind: "anonymous",
      caller_id: "203.0.113.7",
      decision: "allowed",
      status: 200,
      check_ms: 0.5,
      upstream_ms: 12.34,
      duration_ms: 15.68,
    });
  });

  it("writes no line when log.requests is off, and still counts", async () => {
    const { env, ctx } = setup(runtimeOf(yaml(false)));
    complete(env, ctx);
    expect(env.lines.lines).toEqual([]);
    expect(await counter(env, "tollgate_requests_total", { decision: "allowed" })).toBe(1);
  });
});

describe("refusals the SDKs understand (issue 30)", () => {
  const aiRt = (format: string) =>
    runtimeOf(`
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
retry_hint_max: 60s
routes:
  - { name: chat, match: { path: /api }, upstream: api, ai: { format: ${format} } }
`);
  const budget: LimitSpec = {
    algorithm: "fixed_window",
    name: "team.tenant",
    limit: 1000,
    windowMs: 30 * 86_400_000,
    calendar: { unit: "month", tz: "UTC" },
    unit: "tokens",
  };
  const denied = (spec: LimitSpec, retryAfterMs: number): DeniedDecision => {
    const a = {
      limit: compiledLimit(spec, 0.5),
      spec,
      outcome: { allowed: false, remaining: 0, resetMs: retryAfterMs, retryAfterMs },
    };
    return { kind: "denied", applied: [a], violated: [a], retryAfterMs };
  };
  const answered = (format: string, decision: DeniedDecision) => {
    const { env, res, ctx } = setup(aiRt(format));
    ctx.route = ctx.gen.runtime.routeList[0]!;
    tooMany(env, ctx, decision);
    return res;
  };

  it("a spent budget on an OpenAI route: the OpenAI error shape, insufficient_quota, and do not retry", () => {
    const res = answered("openai", denied(budget, 86_400_000));
    expect(res.statusCode).toBe(429);
    expect(res.headers["content-type"]).toBe("application/json");
    expect(res.headers["x-should-retry"]).toBe("false");
    expect(res.headers["retry-after-ms"]).toBe("86400000");
    const error = res.json().error as Record<string, unknown>;
    expect(error).toMatchObject({ type: "insufficient_quota", code: "insufficient_quota", param: null });
    expect(error.message).toMatch(/"team\.tenant" allows 1000 tokens per calendar month/);
    expect(error["violated-policies"]).toEqual(["team.tenant"]);
  });

  it("a short rate: rate_limit_exceeded, and the exact wait without x-should-retry", () => {
    const rate: LimitSpec = { algorithm: "token_bucket", name: "team.chat", burst: 1, intervalMs: 1000 };
    const res = answered("responses", denied(rate, 1200));
    expect(res.headers["x-should-retry"]).toBeUndefined();
    expect(res.headers["retry-after-ms"]).toBe("1200");
    expect(res.headers["retry-after"]).toBe("2");
    expect(res.json().error).toMatchObject({ type: "rate_limit_exceeded", code: "rate_limit_exceeded" });
  });

  it("Anthropic's shape on an Anthropic route, problem+json elsewhere", () => {
    const res = answered("anthropic", denied(budget, 86_400_000));
    expect(res.json()).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
    const { env, res: plain, ctx } = setup();
    tooMany(env, ctx, denied(budget, 86_400_000));
    expect(plain.headers["content-type"]).toBe("application/problem+json");
    expect(plain.headers["x-should-retry"]).toBe("false");
  });
});
