// What a request on a budgeted route leaves behind once it is charged (charge.ts): its usage in
// the ledger (GET /admin/usage), and a budget alert when the request carried its budget past
// `calendar.alert_at` of a calendar limit. Budgets are limits with `unit: tokens` and limits
// with a calendar window; a request under none of them records nothing and costs nothing here.
//
// An alert is decided from what the store answered (used before and after this request's
// units), so exactly one request crosses the threshold in the common case; two requests that
// cross it together, or a gateway that restarts, would each alert again, so the crossing is
// claimed once per budget key and period in the ledger (Redis SET NX across instances).
import { periodAt, periodId } from "../limits/calendar.js";
import type { AllowedDecision, AppliedLimit } from "../limits/decision.js";
import { callerLabel } from "../limits/keys.js";
import type { ChargeResult } from "./charge.js";
import type { Admitted, ProxyEnv } from "./context.js";

type ReporterEnv = Pick<ProxyEnv, "metrics" | "logger" | "clock">;

const isBudget = (a: AppliedLimit) =>
  a.spec.unit !== undefined || (a.spec.algorithm === "fixed_window" && a.spec.calendar !== undefined);

/** The callback charge.ts calls once the request is charged; undefined when it has no budget. */
export function budgetReporter(
  env: ReporterEnv,
  ctx: Admitted,
  decision: AllowedDecision,
): ((result: ChargeResult) => void) | undefined {
  const { applied } = decision;
  let budgets: number[] | undefined;
  for (let i = 0; i < applied.length; i++) {
    if (!isBudget(applied[i]!)) continue;
    budgets ??= [];
    budgets.push(i);
  }
  if (!budgets) return undefined;
  const indices = budgets;
  return (result) => {
    const atMs = env.clock.now();
    recordUsage(env, ctx, decision, indices, result, atMs);
    for (const i of indices) alertIfCrossed(env, ctx, decision, i, result, atMs);
  };
}

function recordUsage(
  env: ReporterEnv,
  ctx: Admitted,
  decision: AllowedDecision,
  budgets: readonly number[],
  result: ChargeResult,
  atMs: number,
): void {
  const ledger = ctx.gen.usage;
  if (!ledger) return;
  const caller = ctx.caller;
  const tokenBudget = budgets.some((i) => decision.applied[i]!.spec.unit !== undefined);
  void ledger
    .record({
      caller: callerLabel(caller),
      ...(caller.kind === "client" && caller.tenant !== undefined ? { tenant: caller.tenant } : {}),
      limits: budgets.map((i) => decision.applied[i]!.spec.name),
      // A token budget was charged the units; a request counted by calendar limits alone
      // reports the tokens its upstream said it used, if it said so.
      tokens: tokenBudget || result.reported ? result.units : 0,
      ...(result.usdMicros ? { usdMicros: result.usdMicros } : {}),
      atMs,
    })
    .catch((err: unknown) => {
      // The ledger reports its own failures (onError); a throw here is a bug, never a crash.
      env.logger.warn({ request_id: ctx.requestId, err }, "usage not recorded");
    });
}

/**
 * The share of a calendar budget past which its caller is alerted, once per period: from the
 * config's calendar.alert_at (undefined: alerts are off).
 */
function alertIfCrossed(
  env: ReporterEnv,
  ctx: Admitted,
  decision: AllowedDecision,
  i: number,
  result: ChargeResult,
  atMs: number,
): void {
  const charged = result.charged?.[i];
  const share = ctx.gen.runtime.budgetAlertAt;
  const a = decision.applied[i]!;
  const spec = a.spec;
  if (share === undefined || spec.algorithm !== "fixed_window" || spec.calendar === undefined) return;
  const quota = a.limit.quota;
  const threshold = Math.max(1, Math.ceil(share * quota));
  // Used once admitted, and before: what this request took at admission is its check's cost.
  const admitted = quota - a.outcome.remaining;
  const before = admitted - decision.checks[i]!.cost;
  // An AI request's reservation was settled to what it used, not to what the store shows now.
  const used = result.used?.[i];
  const after = used !== undefined ? before + used : charged ? quota - charged.remaining : admitted;
  if (!(before < threshold && after >= threshold)) return;
  const { unit, tz } = spec.calendar;
  const period = periodId(atMs, unit, tz);
  const claim = ctx.gen.usage?.claimAlert?.(
    `${decision.checks[i]!.key}:alert:${period}`,
    periodAt(atMs, unit, tz).end,
  );
  void (claim ?? Promise.resolve(true)).then((first) => {
    if (!first) return;
    env.metrics.budgetAlerts.labels(spec.name).inc();
    env.logger.warn(
      {
        caller: callerLabel(ctx.caller),
        limit: spec.name,
        period,
        used: after,
        quota,
        alert_at: share,
      },
      `budget alert: "${spec.name}" passed ${Math.round(share * 100)} % of its ${quota} for ${period}`,
    );
  });
}
