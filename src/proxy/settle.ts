// Settling an AI request's reservation once its answer is known (the per-response handler of AI
// routes, in place of charge.ts). The reservation was taken at admission, in the same atomic
// check as the request's rate limits; here each budget is moved from what it reserved to what
// the request used:
// - the upstream's response ended and reported usage (ai-usage.ts): each token budget is
//   charged its tokens and each money budget its cost at the model's prices, the difference to
//   the reservation given back (or, for the rare usage beyond it, debited into debt and counted
//   in tollgate_ai_overrun_total);
// - the answer reported nothing usable (the client left, the upstream cut the stream or the
//   deadline did, the body came compressed or without usage): the reservation stands. A client
//   that hangs up before the usage event, or a stream that never asked for it, so pays at most
//   what it reserved, and never less than what the upstream could have generated;
// - the upstream answered an error without usage, or was never reached (refused, no connection
//   within the timeout): nothing was generated, so all but the route's cost goes back (a money
//   budget gets all of it back).
// The settlement is recorded when the upstream's response ends, before the client's does, so a
// caller's next request already sees it; a failure is counted and logged, never turned into a
// failed response (what it could not give back stays taken: an over-count, never an overspend).
import type { IncomingHttpHeaders } from "node:http";
import { type ReportedUsage, totalTokens, usageMicroDollars } from "../ai/prices.js";
import { reservedUnits } from "../limits/budget-reservation.js";
import type { AllowedDecision } from "../limits/decision.js";
import { type AiUsageMeter, aiUsageMeter } from "../usage/ai-usage.js";
import type { ChargeResult } from "./charge.js";
import type { Admitted, AiExchange, ProxyEnv } from "./context.js";
import type { ForwardHandler, ForwardResult } from "./stream.js";

type HandlerEnv = Pick<ProxyEnv, "metrics" | "logger" | "clock">;

/** What the answer left to charge: its usage, nothing usable (keep), or nothing generated (release). */
type Outcome =
  | { kind: "reported"; usage: ReportedUsage }
  | { kind: "kept"; why: "compressed" | "no_usage" | "cut_short" }
  | { kind: "released" };

export class SettleReservation implements ForwardHandler {
  private meter: AiUsageMeter | null = null;
  private compressed = false;
  private status = 0;
  private settled = false;

  constructor(
    private readonly next: ForwardHandler,
    private readonly env: HandlerEnv,
    private readonly ctx: Admitted,
    private readonly ai: AiExchange,
    private readonly decision: AllowedDecision,
    /** Called once with what the request was charged (the usage ledger, budget alerts). */
    private readonly onCharged: ((result: ChargeResult) => void) | undefined,
  ) {}

  onResponseHead(headers: IncomingHttpHeaders, status = 200): Promise<unknown> | null {
    this.status = status;
    const encoding = headerText(headers["content-encoding"])?.trim().toLowerCase();
    // Asked for identity (headers.ts): an upstream that compressed anyway cannot be read.
    if (encoding && encoding !== "identity") this.compressed = true;
    else this.meter = aiUsageMeter(this.ctx.route.ai!.format, headerText(headers["content-type"]));
    return this.next.onResponseHead(headers, status);
  }

  onResponseData(chunk: Buffer): void {
    this.meter?.write(chunk);
  }

  onResponseEnd(_trailers?: IncomingHttpHeaders): Promise<unknown> | null {
    if (this.settled) return null;
    this.settled = true;
    const usage = this.meter?.usage();
    if (usage) return this.settle({ kind: "reported", usage });
    if (this.status < 200 || this.status >= 300) return this.settle({ kind: "released" });
    return this.settle({ kind: "kept", why: this.compressed ? "compressed" : "no_usage" });
  }

  onDone(result: ForwardResult): void {
    if (!this.settled) {
      this.settled = true;
      // No head came: a request that never left the gateway (the client left first, no
      // connection was made) generated nothing. One the upstream took, and then failed on,
      // timed out on or lost its client during, may have: the reservation pays for it.
      const neverReached = this.status === 0 && result.reached === false;
      void this.settle(neverReached ? { kind: "released" } : { kind: "kept", why: "cut_short" });
    }
    this.next.onDone(result);
  }

  private settle(outcome: Outcome): Promise<void> {
    const { env, ctx, ai, decision } = this;
    const route = ctx.route.name;
    env.metrics.countSettlement(route, outcome.kind);
    if (outcome.kind === "kept") env.metrics.countUnreported(route, outcome.why);
    const checks = decision.checks;
    const used: number[] = [];
    const deltas: number[] = [];
    let changes = false;
    for (const c of checks) {
      const unit = c.spec.unit;
      const actual = unit === undefined ? c.cost : this.usedIn(unit, c.cost, outcome);
      used.push(unit === undefined ? 0 : actual);
      deltas.push(actual - c.cost);
      if (actual !== c.cost) changes = true;
      if (unit !== undefined && actual > c.cost)
        env.metrics.countOverrun(route, unit === "usd" ? "usd_micros" : "tokens", actual - c.cost);
    }
    // The request's own figures, whatever budgets it met: what the ledger records.
    const tokens = this.usedIn("tokens", reservedUnits(ai.reservation, "tokens", this.output()), outcome);
    const micros = ai.price
      ? this.usedIn("usd", reservedUnits(ai.reservation, "usd", this.output()), outcome)
      : 0;
    env.metrics.countCharged(route, tokens);
    const result = (charged: ChargeResult["charged"]): ChargeResult => ({
      units: tokens,
      reported: outcome.kind === "reported",
      charged,
      usdMicros: micros,
      used,
    });
    if (!changes) {
      this.onCharged?.(result(undefined));
      return Promise.resolve();
    }
    return ctx.gen.limiter.settle(checks, decision.decidedAt, deltas).then((r) => {
      if (!r.ok) {
        env.metrics.storeErrors.labels(r.reason).inc();
        env.logger.warn(
          {
            request_id: ctx.requestId,
            trace_id: ctx.trace?.traceId,
            reason: r.reason,
            outcome: outcome.kind,
          },
          "AI settlement not confirmed by the store",
        );
      }
      this.onCharged?.(result(r.ok ? r.charged : undefined));
    });
  }

  /** The output per completion the budgets hold (lowered when clamped). */
  private output(): number {
    return this.decision.output ?? this.ai.reservation.output;
  }

  /** What a budget of `unit` that reserved `reserved` is charged for the outcome. */
  private usedIn(unit: "tokens" | "usd", reserved: number, outcome: Outcome): number {
    switch (outcome.kind) {
      case "reported":
        if (unit === "tokens") return totalTokens(outcome.usage);
        return this.ai.price ? usageMicroDollars(outcome.usage, this.ai.price) : reserved;
      case "kept":
        return reserved;
      case "released":
        return unit === "tokens" ? Math.min(reserved, this.ctx.route.cost) : 0;
    }
  }
}

/**
 * An AI request admitted and never forwarded (its client left while a leaky bucket held it):
 * nothing was generated, so its reservation goes back but for the route's cost.
 */
export function releaseUnforwarded(
  env: HandlerEnv,
  ctx: Admitted,
  decision: AllowedDecision,
  onCharged?: (result: ChargeResult) => void,
): void {
  if (!ctx.ai || decision.degraded) return;
  const settle = new SettleReservation(NOTHING, env, ctx, ctx.ai, decision, onCharged);
  settle.onDone({ status: 499, clientGone: true, reached: false });
}

/** The end of a chain that has nothing after it. */
const NOTHING: ForwardHandler = { onResponseHead: () => null, onDone: () => {} };

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
