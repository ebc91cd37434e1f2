// The second stage: what the limits say about an admitted request, and what that decision means
// for its answer (labels, metrics, the headers every answer carries). The limiter decides; this
// only asks it and records the answer. Where the request goes next is the pipeline's switch.
import { rateLimitHeaders } from "../http/ratelimit-headers.js";
import type { AppliedLimit, DegradedReason, LimitDecision } from "../limits/decision.js";
import { callerLabel } from "../limits/state-keys.js";
import type { Admitted, ProxyEnv } from "./context.js";
import { roundMs } from "./respond.js";

type DecideEnv = Pick<ProxyEnv, "metrics" | "logger" | "sustained" | "clock">;

const UNLIMITED: LimitDecision = Object.freeze({ kind: "unlimited" });

/**
 * The request's decision, from the limiter of the request's own generation. An exempt caller is
 * not asked: it is decided at once, without a promise.
 */
export function decide(ctx: Admitted, env: DecideEnv): LimitDecision | Promise<LimitDecision> {
  if (ctx.exempt) return UNLIMITED;
  ctx.checkStartedAt = env.clock.monotonic();
  return ctx.gen.limiter.check(ctx.caller, ctx.route, ctx, ctx.ai?.reservation);
}

/** The limiter answered: how long it took (tollgate_limit_check_duration_seconds, check_ms). */
export function observeCheck(ctx: Admitted, env: DecideEnv): void {
  const seconds = (env.clock.monotonic() - ctx.checkStartedAt) / 1000;
  env.metrics.checkDuration.observe(seconds);
  ctx.checkMs = roundMs(seconds * 1000);
}

/**
 * The limiter's promise rejected. It returns store failures as decisions, so this is a bug; the
 * request is still answered, as the store being unreachable under the route's failure policy.
 */
export function checkFailed(ctx: Admitted, env: DecideEnv, err: unknown): LimitDecision {
  env.logger.error(
    { err, request_id: ctx.requestId, trace_id: ctx.trace?.traceId },
    "limit check failed unexpectedly",
  );
  return {
    kind: "degraded",
    reason: "connection",
    policy: ctx.route.onFailure === "closed" ? "closed" : "open",
    error: err as Error,
  };
}

/**
 * Records a decision on the request: its label, the metrics it moves (store errors, deny-cache
 * denials, near-limit, sustained denials) and the headers any answer to it carries
 * (X-RateLimit-Degraded; the rate-limit headers of an admitted request). A denial's own headers
 * are the 429's (respond.ts).
 */
export function recordDecision(ctx: Admitted, env: DecideEnv, decision: LimitDecision): void {
  switch (decision.kind) {
    case "denied":
      // on_failure: local decided in-process: a real decision, but say it is degraded.
      if (decision.degraded) degraded(ctx, env, decision.degraded);
      if (decision.local) env.metrics.localDenials.inc();
      env.sustained.denied(callerLabel(ctx.caller), env.clock.now());
      return;
    case "degraded":
      degraded(ctx, env, decision.reason);
      ctx.decision = decision.policy === "closed" ? "degraded_closed" : "degraded_open";
      return;
    case "allowed":
      if (decision.degraded) degraded(ctx, env, decision.degraded);
      rateLimitHeaders(decision.applied, ctx.gen.runtime.headerStyles, env.clock.now(), ctx.responseHeaders);
      ctx.decision = decision.degraded
        ? "degraded_local"
        : decision.shadowLimited
          ? "shadow_limited"
          : "allowed";
      if (nearLimit(decision.applied)) env.metrics.countNearLimit(ctx.routeName);
      return;
    case "unlimited":
      ctx.decision = ctx.exempt ? "exempt" : "allowed";
      return;
  }
}

function degraded(ctx: Admitted, env: DecideEnv, reason: DegradedReason): void {
  env.metrics.storeErrors.labels(reason).inc();
  ctx.responseHeaders["x-ratelimit-degraded"] = "true";
}

/** Whether the request left less than 20 % of any limit it was admitted under. */
export function nearLimit(applied: readonly AppliedLimit[]): boolean {
  for (const a of applied) if (!a.spec.shadow && a.outcome.remaining < 0.2 * a.limit.quota) return true;
  return false;
}
