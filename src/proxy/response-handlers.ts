// Per-response work, as handlers layered around a forward or a tunnel (the way undici layers
// interceptors around a dispatch): the innermost ends the request (metrics, the log line); the
// ones around it give back concurrency leases and charge what the upstream says the request
// cost (charge.ts). Each is added only when the request needs it, so a plain request carries one handler.
import type { IncomingHttpHeaders } from "node:http";
import type { AllowedDecision, StoreResult } from "../limits/decision.js";
import { budgetReporter } from "./budget-usage.js";
import { ChargeReported } from "./charge.js";
import type { Admitted, ProxyEnv, RequestContext } from "./context.js";
import { complete, roundMs } from "./respond.js";
import { SettleReservation } from "./settle.js";
import type { ForwardHandler, ForwardResult } from "./stream.js";

type HandlerEnv = Pick<ProxyEnv, "metrics" | "logger" | "inFlight" | "clock" | "callerShares">;

/** Ends the request once its upstream exchange is over: upstream metrics, status, the log line. */
export class EndRequest implements ForwardHandler {
  private readonly startedAt: number;

  constructor(
    private readonly env: HandlerEnv,
    private readonly ctx: Admitted,
    /** Whether the exchange counts in tollgate_upstream_duration_seconds (a tunnel's life does not). */
    private readonly timed: boolean,
  ) {
    this.startedAt = env.clock.monotonic();
  }

  onResponseHead(): null {
    return null;
  }

  onDone(result: ForwardResult): void {
    const { env, ctx } = this;
    const upstream = ctx.route.upstream.name;
    const ms = env.clock.monotonic() - this.startedAt;
    if (this.timed) env.metrics.observeUpstream(upstream, ms / 1000);
    if (result.failure) env.metrics.upstreamErrors.labels(upstream, result.failure).inc();
    ctx.upstreamMs = roundMs(ms);
    ctx.upstreamError = result.failure;
    ctx.status = result.status;
    complete(env, ctx);
  }
}

/**
 * Gives the request's concurrency leases back when it ends (for a tunnel: when the socket
 * closes, so a slot is held for the life of the socket).
 */
export class ReleaseLeases implements ForwardHandler {
  constructor(
    private readonly next: ForwardHandler,
    private readonly env: HandlerEnv,
    private readonly ctx: RequestContext,
    private readonly release: () => Promise<StoreResult>,
  ) {}

  onResponseHead(headers: IncomingHttpHeaders, status?: number): Promise<unknown> | null {
    return this.next.onResponseHead(headers, status);
  }

  onDone(result: ForwardResult): void {
    releaseLeases(this.env, this.ctx, this.release);
    this.next.onDone(result);
  }
}

/** Gives back the request's concurrency leases; a failure leaves them to expire. */
export function releaseLeases(
  env: Pick<ProxyEnv, "metrics" | "logger">,
  ctx: RequestContext,
  release: () => Promise<StoreResult>,
): void {
  release().then((r) => {
    if (r.ok) return;
    env.metrics.storeErrors.labels(r.reason).inc();
    env.logger.warn(
      { request_id: ctx.requestId, trace_id: ctx.trace?.traceId, reason: r.reason },
      "concurrency lease not released; it will expire",
    );
  });
}

/** The handlers a forwarded (or tunnelled) request ends through, innermost first. */
export function responseHandler(
  env: HandlerEnv,
  ctx: Admitted,
  decision: AllowedDecision | null,
  tunnelled: boolean,
): ForwardHandler {
  let handler: ForwardHandler = new EndRequest(env, ctx, !tunnelled);
  if (decision?.release) handler = new ReleaseLeases(handler, env, ctx, decision.release);
  // Only requests decided by the shared store are post-charged (or settled) there. A tunnel has
  // no cost header, and its frames are not read: on a route that reads usage it costs max_cost.
  if (!decision || decision.degraded) return handler;
  // An AI request's reservation is settled to its usage (a WebSocket never reaches one: its
  // handshake is a GET, which passes an AI route unread).
  if (ctx.ai && !tunnelled)
    return new SettleReservation(handler, env, ctx, ctx.ai, decision, budgetReporter(env, ctx, decision));
  if (!tunnelled || ctx.route.charge.usage)
    handler = new ChargeReported(handler, env, ctx, decision, budgetReporter(env, ctx, decision), tunnelled);
  return handler;
}
