// Every answer the gateway gives itself (refusals, 429, 503, 500), each a problem from the table
// (http/problem.ts), and the one place a request ends: counted once and logged in one line.
import type { IncomingMessage } from "node:http";
import { problemFor, sendProblem } from "../http/problem.js";
import { ceilSeconds, rateLimitHeaders } from "../http/ratelimit-headers.js";
import type { DegradedReason, DeniedDecision } from "../limits/decision.js";
import type { RequestDecision } from "../observability/metrics.js";
import type { ProxyEnv, Refusal, RequestContext } from "./context.js";

type RespondEnv = Pick<ProxyEnv, "metrics" | "logger" | "inFlight" | "clock">;

const DEGRADED_WHY: Record<DegradedReason, string> = {
  timeout: "the limit store did not answer in time",
  connection: "the limit store is unreachable",
  script: "the limit store refused the check",
  breaker_open: "the limit store is failing and is not being asked for a while",
};

/** Answers a refusal with its problem (and, for a 429, Retry-After). */
export function refuse(env: RespondEnv, ctx: RequestContext, refusal: Refusal): void {
  const headers = ctx.responseHeaders;
  if (refusal.headers) Object.assign(headers, refusal.headers);
  const problem = problemFor(refusal.code, refusal.detail);
  if (refusal.retryAfterSeconds !== undefined) {
    headers["retry-after"] = String(refusal.retryAfterSeconds);
    problem.retry_after_seconds = refusal.retryAfterSeconds;
  }
  answer(env, ctx, refusal.decision, problem, headers);
}

/** From this wait on, a 429 also names the instant it ends (`retry_at`). */
const LONG_WAIT_SECONDS = 3600;

/** A limit denied the request: 429 with Retry-After, the rate-limit headers and what denied it. */
export function tooMany(env: RespondEnv, ctx: RequestContext, decision: DeniedDecision): void {
  const headers = ctx.responseHeaders;
  const retryAfter = ceilSeconds(decision.retryAfterMs, 1);
  rateLimitHeaders(decision.applied, ctx.gen.runtime.headerStyles, env.clock.now(), headers);
  headers["retry-after"] = String(retryAfter);
  const violated = decision.violated;
  let described = "";
  const names: string[] = [];
  for (let i = 0; i < violated.length; i++) {
    const v = violated[i]!;
    // A local share (on_failure: local, the store away) is described as what denied, not as
    // the shared limit it stands in for.
    described += (i ? "; " : "") + v.limit.description;
    names.push(v.spec.name);
  }
  // A token budget with units left refused the request for its route's max_cost: say so, or
  // the client reads "100000 tokens per month" beside RateLimit-Remaining: 150 and wonders.
  const maxCost = ctx.route?.maxCost;
  if (maxCost !== undefined && violated.some((v) => v.spec.unit === "tokens" && v.outcome.remaining > 0))
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
  answer(env, ctx, "limited", problem, headers);
}

/** The store cannot decide and the route fails closed: 503, retry in a second. */
export function unavailable(env: RespondEnv, ctx: RequestContext, reason: DegradedReason): void {
  const headers = ctx.responseHeaders;
  headers["retry-after"] = "1";
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
): void {
  ctx.decision = decision;
  ctx.status = problem.status;
  const req = ctx.req;
  // Answered before its body was read (a 401, a 429): Node keeps the connection and reads the
  // rest of the body to reach the next request, however much is announced, for as long as the
  // client takes to send it (found by an attack pass: 1000 trickling connections with a bad key
  // held 1000 descriptors for the 120 s request timeout, and four fast ones made the gateway
  // read 5 GB in 10 s). A short body is still read, within DRAIN_MAX_MS, and its connection
  // reused; a longer one, or one of unknown length, closes the connection with the answer.
  if (req.httpVersionMajor === 1 && !req.complete && announcesBody(req)) {
    if (bodyPastDrain(req)) {
      headers.connection = "close";
      ctx.res.shouldKeepAlive = false;
    } else {
      ctx.res.once("finish", () => drainWithin(req, DRAIN_MAX_MS));
    }
  }
  sendProblem(ctx.res, problem, headers);
  complete(env, ctx);
}

/** Most of an unread request body read after answering without it, in bytes and in time. */
export const DRAIN_MAX_BYTES = 64 * 1024;
export const DRAIN_MAX_MS = 2000;

/** Whether an HTTP/1.1 request has a body at all (most refused requests are bodiless GETs). */
function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/** A body announced past DRAIN_MAX_BYTES, or chunked (of a length nobody knows yet). */
function bodyPastDrain(req: IncomingMessage): boolean {
  if (req.headers["transfer-encoding"] !== undefined) return true;
  const length = Number(req.headers["content-length"] ?? 0);
  return !(length <= DRAIN_MAX_BYTES);
}

/**
 * Closes the connection if the answered request's body has not all arrived within `ms`. Only a
 * timer (no listener on the socket, which a keep-alive client could make pile up): by then the
 * socket is closed, or serving a later request of a body that did arrive.
 */
function drainWithin(req: IncomingMessage, ms: number): void {
  const socket = req.socket;
  if (req.complete || !socket || socket.destroyed) return;
  setTimeout(() => {
    if (!req.complete) socket.destroy();
  }, ms).unref();
}

/** The request has ended: out of the in-flight count, counted, and logged in one line. */
export function complete(env: RespondEnv, ctx: RequestContext): void {
  if (ctx.done) return;
  ctx.done = true;
  env.inFlight.count--;
  env.metrics.countRequest(ctx.routeName, ctx.decision);
  if (!ctx.gen.runtime.config.log.requests) return;
  const caller = ctx.caller;
  env.logger.info(
    {
      request_id: ctx.requestId,
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
