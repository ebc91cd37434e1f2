// Every answer the gateway gives itself (refusals, 429, 503, 500), each a problem from the table
// (http/problem.ts), and the one place a request ends: counted once and logged in one line.
import { problemCode, problemFor, sendProblem } from "../http/problem.js";
import { type RefusedFor, sendProviderError } from "../http/provider-error.js";
import { ceilSeconds, rateLimitHeaders } from "../http/ratelimit-headers.js";
import { answeringBeforeBody } from "../http/unread-body.js";
import { reservedUnits } from "../limits/budget-reservation.js";
import type { DegradedReason, DeniedDecision } from "../limits/decision.js";
import { isBudget } from "../limits/spec.js";
import { quantity } from "../limits/units.js";
import type { RequestDecision } from "../observability/metrics.js";
import type { ProxyEnv, Refusal, RequestContext } from "./context.js";
import { endTrace } from "./trace.js";

type RespondEnv = Pick<ProxyEnv, "metrics" | "logger" | "inFlight" | "clock" | "callerShares">;

const DEGRADED_WHY: Record<DegradedReason, string> = {
  timeout: "the limit store did not answer in time",
  connection: "the limit store is unreachable",
  script: "the limit store refused the check",
  replication: "the limit store's replicas did not confirm the decision in time",
  breaker_open: "the limit store is failing and is not being asked for a while",
};

/** Answers a refusal with its problem (and, for a 429, Retry-After). */
export function refuse(env: RespondEnv, ctx: RequestContext, refusal: Refusal): void {
  const headers = ctx.responseHeaders;
  if (refusal.headers) Object.assign(headers, refusal.headers);
  const problem = problemFor(refusal.code, refusal.detail);
  if (refusal.retryAfterSeconds !== undefined) {
    retryHints(ctx, headers, refusal.retryAfterSeconds * 1000);
    problem.retry_after_seconds = refusal.retryAfterSeconds;
  }
  answer(
    env,
    ctx,
    refusal.decision,
    problem,
    headers,
    refusal.code === "quota_exceeded" ? "rate" : undefined,
  );
}

/**
 * Retry-After (whole seconds, at least 1), `retry-after-ms` (the exact wait, which the OpenAI
 * and Anthropic SDKs read first), and `x-should-retry: false` once the wait is longer than
 * `retry_hint_max`: those SDKs sleep the whole Retry-After before retrying, with no cap of their
 * own (a spent daily budget left `openai` asleep for 23 hours), and read that header as "do not".
 */
function retryHints(ctx: RequestContext, headers: Record<string, string>, waitMs: number): void {
  const ms = Math.max(0, Math.ceil(waitMs));
  headers["retry-after"] = String(ceilSeconds(ms, 1));
  headers["retry-after-ms"] = String(ms);
  if (ms > ctx.gen.runtime.retryHintMaxMs) headers["x-should-retry"] = "false";
}

/** From this wait on, a 429 also names the instant it ends (`retry_at`). */
const LONG_WAIT_SECONDS = 3600;

/** A limit denied the request: 429 with Retry-After, the rate-limit headers and what denied it. */
export function tooMany(env: RespondEnv, ctx: RequestContext, decision: DeniedDecision): void {
  const headers = ctx.responseHeaders;
  const retryAfter = ceilSeconds(decision.retryAfterMs, 1);
  rateLimitHeaders(decision.applied, ctx.gen.runtime.headerStyles, env.clock.now(), headers);
  retryHints(ctx, headers, decision.retryAfterMs);
  const violated = decision.violated;
  let described = "";
  const names: string[] = [];
  const reservation = ctx.ai?.reservation;
  for (let i = 0; i < violated.length; i++) {
    const v = violated[i]!;
    // A local share (on_failure: local, the store away) is described as what denied, not as
    // the shared limit it stands in for.
    described += (i ? "; " : "") + v.limit.description;
    // A budget refuses an AI request for its reservation: say what is left and what it asked.
    const unit = v.spec.unit;
    if (reservation && unit !== undefined)
      described += `: ${quantity(v.spec, v.outcome.remaining)} left, and this request reserves ${quantity(v.spec, reservedUnits(reservation, unit))} (up to ${reservation.input} input tokens and ${reservation.output * reservation.choices} output tokens)`;
    names.push(v.spec.name);
  }
  // A token budget with units left refused the request for its route's max_cost: say so, or
  // the client reads "100000 tokens per month" beside RateLimit-Remaining: 150 and wonders.
  const maxCost = ctx.route?.maxCost;
  if (
    maxCost !== undefined &&
    !reservation &&
    violated.some((v) => v.spec.unit === "tokens" && v.outcome.remaining > 0)
  )
    described += `, and this route needs ${maxCost} of them left (its max_cost)`;
  // A budget that resets in hours or days (a calendar month) also says when, as an instant, to
  // the nearest second: the store decided a moment before this clock's now.
  const retryAt =
    retryAfter >= LONG_WAIT_SECONDS
      ? new Date(Math.round((env.clock.now() + decision.retryAfterMs) / 1000) * 1000).toISOString()
      : undefined;
  const problem = problemFor(
    "quota_exceeded",
    `Rate limit exceeded: ${described}. Retry in ${retryAfter} s${retryAt ? ` (at ${retryAt})` : ""}.`,
  );
  problem["violated-policies"] = names;
  problem.retry_after_seconds = retryAfter;
  if (retryAt) problem.retry_at = retryAt;
  // A budget, or a calendar quota, is spent until it resets; anything else is a rate.
  const quota = violated.some(
    (v) => isBudget(v.spec) || (v.spec.algorithm === "fixed_window" && v.spec.calendar),
  );
  answer(env, ctx, "limited", problem, headers, quota ? "quota" : "rate");
}

/** The store cannot decide and the route fails closed: 503, retry in a second. */
export function unavailable(env: RespondEnv, ctx: RequestContext, reason: DegradedReason): void {
  const headers = ctx.responseHeaders;
  retryHints(ctx, headers, 1000);
  const problem = problemFor(
    "temporary_reduced_capacity",
    `Rate limits cannot be checked right now (${DEGRADED_WHY[reason]}), and this route fails closed. Retry shortly.`,
  );
  problem.retry_after_seconds = 1;
  answer(env, ctx, "degraded_closed", problem, headers);
}

/**
 * A bug or an unexpected throw: 500 (or the response cut if it started). Only the request id
 * goes with it; the rate-limit headers a stage may have set describe an answer never given.
 */
export function failed(env: RespondEnv, ctx: RequestContext): void {
  answer(
    env,
    ctx,
    "internal_error",
    problemFor("internal_error", "the gateway failed to handle this request"),
    { "x-request-id": ctx.requestId },
  );
}

function answer(
  env: RespondEnv,
  ctx: RequestContext,
  decision: RequestDecision,
  problem: ReturnType<typeof problemFor>,
  headers: Record<string, string>,
  refused?: RefusedFor,
): void {
  ctx.decision = decision;
  ctx.status = problem.status;
  // Answered before its body was read (a 401, a 429): at most a short body is read after it.
  answeringBeforeBody(ctx.req, ctx.res, headers);
  // On an AI route, in the provider's shape: its SDKs read that, and not problem+json.
  const format = ctx.route?.ai?.format;
  if (format) sendProviderError(ctx.res, format, problem, problemCode(problem), headers, refused);
  else sendProblem(ctx.res, problem, headers);
  complete(env, ctx);
}

/** The request has ended: out of the in-flight count, counted, and logged in one line. */
export function complete(env: RespondEnv, ctx: RequestContext): void {
  if (ctx.done) return;
  ctx.done = true;
  env.inFlight.count--;
  if (ctx.shareHeld !== undefined) env.callerShares.release(ctx.shareHeld, ctx.caller!);
  ctx.releaseBody?.();
  env.metrics.countRequest(ctx.routeName, ctx.decision);
  const trace = ctx.trace;
  if (trace) endTrace(trace, ctx);
  if (!ctx.gen.runtime.config.log.requests) return;
  const caller = ctx.caller;
  env.logger.info(
    {
      request_id: ctx.requestId,
      // Absent with tracing off: pino leaves undefined out of the line.
      trace_id: trace?.traceId,
      span_id: trace?.spanId,
      method: ctx.method,
      path: ctx.path,
      route: ctx.routeName || null,
      caller_kind: caller?.kind ?? null,
      caller_id: caller === undefined ? null : caller.kind === "client" ? caller.id : caller.ipKey,
      decision: ctx.decision,
      status: ctx.status,
      check_ms: ctx.checkMs,
      queued_ms: ctx.queuedMs,
      upstream_ms: ctx.upstreamMs,
      upstream_error: ctx.upstreamError,
      duration_ms: roundMs(env.clock.monotonic() - ctx.startedAt),
    },
    "request",
  );
}

/** Milliseconds to two decimals, as the log line writes them. */
export function roundMs(ms: number): number {
  return Math.round(ms * 100) / 100;
}
