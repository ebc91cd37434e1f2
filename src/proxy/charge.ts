// What a request really cost, as its upstream reports it (route `charge`), debited after the
// fact on top of the route's cost taken at admission:
// - `header`: Tollgate-Cost in the response head is charged before the head reaches the client
//   (its RateLimit headers then say what is left after the real cost); Tollgate-Cost in the
//   trailers, at the end.
// - `usage`: token counts in a JSON body or in the events of a text/event-stream, read by a
//   usage meter (src/usage/) as each chunk passes to the client: nothing is held back, and the
//   charge is recorded when the upstream's response ends, before the client's does, so the
//   caller's next request already sees it. A client that leaves early is charged what the
//   upstream had reported by then (the route's cost, taken up front, otherwise).
// A charge that fails (the store is away) is counted and logged, never turned into a failed
// response. Units below the route's cost are never given back.
import type { IncomingHttpHeaders } from "node:http";
import { rateLimitHeaders } from "../http/ratelimit-headers.js";
import type { AllowedDecision, AppliedLimit } from "../limits/decision.js";
import type { ChargedLimit } from "../limits/stores/contract.js";
import type { UnreportedReason } from "../observability/metrics.js";
import { type UsageMeter, usageMeter } from "../usage/meter.js";
import type { Admitted, ProxyEnv } from "./context.js";
import { reportedUnits } from "./post-charge.js";
import type { ForwardHandler, ForwardResult } from "./stream.js";

type HandlerEnv = Pick<ProxyEnv, "metrics" | "logger" | "clock">;

/** What the request was charged in all: the route's cost, and what was reported beyond it. */
export interface ChargeResult {
  /** Units in all: the route's cost, or what the upstream reported when that is more. */
  units: number;
  /** Whether the upstream reported anything usable. */
  reported: boolean;
  /** Each check's state after the post-charge (undefined: not charged, or no post-charge). */
  charged: readonly (ChargedLimit | undefined)[] | undefined;
  /** An AI request's cost in micro-dollars (0 without a price). */
  usdMicros?: number;
  /**
   * An AI request's settlement: what each budget check was charged in all, in its unit (0 for
   * the others); absent: each was charged its check's cost plus `units` beyond the route's cost.
   */
  used?: readonly number[];
}

export class ChargeReported implements ForwardHandler {
  private meter: UsageMeter | null = null;
  /** The body is compressed: no usage can be read from it. */
  private unreadable = false;
  /** The upstream answered 2xx: an answer that should carry its usage. */
  private answered = false;
  /** Set once the charge is decided (from the head, the end, or when the exchange stopped). */
  private settled = false;

  constructor(
    private readonly next: ForwardHandler,
    private readonly env: HandlerEnv,
    private readonly ctx: Admitted,
    private readonly decision: AllowedDecision,
    /** Called once with what the request was charged (the usage ledger, budget alerts). */
    private readonly onCharged: ((result: ChargeResult) => void) | undefined,
    /** A WebSocket tunnel: nothing is read, it ends through onDone only. */
    private readonly tunnelled = false,
  ) {}

  onResponseHead(headers: IncomingHttpHeaders, status = 200): Promise<unknown> | null {
    const held = this.next.onResponseHead(headers, status);
    const charge = this.ctx.route.charge;
    this.answered = status >= 200 && status < 300;
    if (charge.header) {
      const units = reportedUnits(headers["tollgate-cost"]);
      if (units !== undefined) {
        this.settled = true;
        const charging = this.settle(units, true);
        if (!charging) return held;
        return held ? Promise.all([held, charging]) : charging;
      }
    }
    if (charge.usage) {
      const encoding = headerText(headers["content-encoding"])?.trim().toLowerCase();
      // Asked for identity (headers.ts), an upstream that compressed anyway cannot be read.
      if (encoding && encoding !== "identity") this.unreadable = true;
      else this.meter = usageMeter(headerText(headers["content-type"]), charge.usage);
    }
    return held;
  }

  onResponseData(chunk: Buffer): void {
    this.meter?.write(chunk);
  }

  onResponseEnd(trailers: IncomingHttpHeaders): Promise<unknown> | null {
    if (this.settled) return null;
    this.settled = true;
    const fromTrailer = this.ctx.route.charge.header ? reportedUnits(trailers["tollgate-cost"]) : undefined;
    return this.settle(fromTrailer ?? this.fromBody(false), false);
  }

  onDone(result: ForwardResult): void {
    // Cut short (the client left, the upstream failed mid-body, the deadline), or a tunnel's
    // end: what the upstream reported so far is what the request used.
    if (!this.settled) {
      this.settled = true;
      void this.settle(this.fromBody(true), false);
    }
    this.next.onDone(result);
  }

  /**
   * The units a `charge: usage` route's body reported; when it reported none that can be
   * trusted, the route's max_cost (its cost without one), counted by reason: a compressed body,
   * a successful answer without usage (a stream without include_usage, a content type no meter
   * reads), one cut short before its usage came, or a WebSocket (whose frames are not read).
   * An upstream's error answer without usage costs the route's cost.
   */
  private fromBody(cutShort: boolean): number | undefined {
    const { ctx } = this;
    if (!ctx.route.charge.usage) return undefined;
    if (this.tunnelled) return this.unreported("websocket");
    if (this.unreadable) return this.unreported("compressed");
    const units = this.meter?.units();
    if (units !== undefined) return units;
    if (cutShort) return this.unreported("cut_short");
    return this.answered ? this.unreported("no_usage") : undefined;
  }

  private unreported(reason: UnreportedReason): number | undefined {
    this.env.metrics.countUnreported(this.ctx.route.name, reason);
    return this.ctx.route.maxCost;
  }

  /**
   * Debits what `units` adds to the route's cost (only token budgets when the config has any);
   * `headPending`: the client has not seen the head yet, so its RateLimit headers are rewritten.
   */
  private settle(units: number | undefined, headPending: boolean): Promise<void> | null {
    const { env, ctx, decision } = this;
    const cost = ctx.route.cost;
    const extra = units === undefined ? 0 : Math.max(0, units - cost);
    env.metrics.countCharged(ctx.route.name, cost + extra);
    const reported = units !== undefined;
    if (extra === 0) {
      // Nothing beyond what admission took: nothing to wait for.
      this.onCharged?.({ units: cost, reported, charged: undefined });
      return null;
    }
    const which = ctx.gen.runtime.tokenBudgets ? "tokens" : "all";
    return ctx.gen.limiter.postCharge(decision.checks, extra, which).then((r) => {
      if (r.ok) {
        if (headPending) this.showCharged(r.charged);
      } else {
        env.metrics.storeErrors.labels(r.reason).inc();
        env.logger.warn(
          { request_id: ctx.requestId, trace_id: ctx.trace?.traceId, units: extra, reason: r.reason },
          "post-charge not recorded",
        );
      }
      this.onCharged?.({ units: cost + extra, reported, charged: r.ok ? r.charged : undefined });
    });
  }

  /** The client sees what is left after the real cost, not before it. */
  private showCharged(charged: readonly (ChargedLimit | undefined)[]): void {
    const { env, ctx, decision } = this;
    const after: AppliedLimit[] = decision.applied.map((a, i) => {
      const c = charged[i];
      if (!c) return a;
      return {
        limit: a.limit,
        spec: a.spec,
        outcome: {
          allowed: a.outcome.allowed,
          remaining: c.remaining,
          resetMs: c.resetMs,
          retryAfterMs: a.outcome.retryAfterMs,
        },
      };
    });
    rateLimitHeaders(after, ctx.gen.runtime.headerStyles, env.clock.now(), ctx.responseHeaders);
  }
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
