// Per-response work, as handlers layered around a forward or a tunnel (the way undici layers
// interceptors around a dispatch): the innermost ends the request (metrics, the log line); the
// ones around it give back concurrency leases and post-charge what the upstream says the request
// cost. Each is added only when the request needs it, so a plain request carries one handler.
import type { IncomingHttpHeaders } from "node:http";
import { rateLimitHeaders } from "../http/ratelimit-headers.js";
import type { AllowedDecision, AppliedLimit, StoreResult } from "../limits/decision.js";
import type { Admitted, ProxyEnv, RequestContext } from "./context.js";
import { extraUnits } from "./post-charge.js";
import { complete, roundMs } from "./respond.js";
import type { ForwardHandler, ForwardResult } from "./stream.js";

type HandlerEnv = Pick<ProxyEnv, "metrics" | "logger" | "inFlight" | "clock">;

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

  onResponseHead(headers: IncomingHttpHeaders): Promise<unknown> | null {
    return this.next.onResponseHead(headers);
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
      { request_id: ctx.requestId, reason: r.reason },
      "concurrency lease not released; it will expire",
    );
  });
}

/**
 * Debits what the upstream's `Tollgate-Cost` says the request cost beyond the route's cost,
 * before the client sees the response, with the limiter of the request's own generation; the
 * client's rate-limit headers then say what is left after the real cost. Only requests decided
 * by the shared store are post-charged.
 */
export class PostCharge implements ForwardHandler {
  constructor(
    private readonly next: ForwardHandler,
    private readonly env: HandlerEnv,
    private readonly ctx: Admitted,
    private readonly decision: AllowedDecision,
  ) {}

  onResponseHead(headers: IncomingHttpHeaders): Promise<unknown> | null {
    const held = this.next.onResponseHead(headers);
    const extra = extraUnits(headers["tollgate-cost"], this.ctx.route.cost);
    if (extra === 0) return held;
    const charging = this.charge(extra);
    return held ? Promise.all([held, charging]) : charging;
  }

  onDone(result: ForwardResult): void {
    this.next.onDone(result);
  }

  private charge(extra: number): Promise<void> {
    const { env, ctx, decision } = this;
    return ctx.gen.limiter.postCharge(decision.checks, extra).then((r) => {
      if (r.ok) {
        // The client sees what is left after the real cost, not before it.
        const after: AppliedLimit[] = decision.applied.map((a, i) => ({
          limit: a.limit,
          spec: a.spec,
          outcome: {
            allowed: a.outcome.allowed,
            remaining: r.charged[i]!.remaining,
            resetMs: r.charged[i]!.resetMs,
            retryAfterMs: a.outcome.retryAfterMs,
          },
        }));
        rateLimitHeaders(after, ctx.gen.runtime.headerStyles, env.clock.now(), ctx.responseHeaders);
        return;
      }
      env.metrics.storeErrors.labels(r.reason).inc();
      env.logger.warn(
        { request_id: ctx.requestId, units: extra, reason: r.reason },
        "post-charge not recorded",
      );
    });
  }
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
  // Only requests decided by the shared store are post-charged there; a tunnel has no cost header.
  if (decision && !decision.degraded && !tunnelled) handler = new PostCharge(handler, env, ctx, decision);
  return handler;
}
