// What a request on a budgeted route leaves behind once it is charged (charge.ts): its usage in
// the ledger (GET /admin/usage), and the budget alerts it raised (src/alerts/) when it carried a
// calendar budget past a share of alerts.thresholds or spent it; a request a calendar budget
// refused raises budget.exhausted. Budgets are limits with `unit: tokens`/`usd` and limits with a
// calendar window; a request under none of them records nothing and costs nothing here.
import type { BudgetCrossing } from "../alerts/alerts.js";
import { type Crossing, crossings } from "../alerts/events.js";
import { type CalendarUnit, periodAt, periodId } from "../limits/calendar.js";
import type { AllowedDecision, AppliedLimit, DeniedDecision } from "../limits/decision.js";
import { callerLabel } from "../limits/state-keys.js";
import { usdOf } from "../limits/units.js";
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
    for (const i of indices) alertIfCrossed(ctx, decision, i, result, atMs);
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
      env.logger.warn({ request_id: ctx.requestId, trace_id: ctx.trace?.traceId, err }, "usage not recorded");
    });
}

/**
 * The events a charge made on calendar budget `i`: each share of alerts.thresholds it crossed,
 * and budget.exhausted when it reached the quota (alerts/events.ts). Decided from what the store
 * answered (used before and after this request's units), so one request crosses each in the
 * common case; the queue's claim makes two that cross together, or a restart, raise it once.
 */
function alertIfCrossed(
  ctx: Admitted,
  decision: AllowedDecision,
  i: number,
  result: ChargeResult,
  atMs: number,
): void {
  const alerts = ctx.gen.alerts;
  const thresholds = ctx.gen.runtime.alerts.thresholds;
  const a = decision.applied[i]!;
  if (!alerts || thresholds.length === 0 || !isCalendar(a)) return;
  const quota = a.limit.quota;
  // Used once admitted, and before: what this request took at admission is its check's cost.
  const admitted = quota - a.outcome.remaining;
  const before = admitted - decision.checks[i]!.cost;
  // An AI request's reservation was settled to what it used, not to what the store shows now.
  const used = result.used?.[i];
  const charged = result.charged?.[i];
  const after = used !== undefined ? before + used : charged ? quota - charged.remaining : admitted;
  for (const crossing of crossings(thresholds, quota, before, after))
    alerts.raise(budgetCrossing(ctx, a, decision.checks[i]!.key, after, crossing, atMs));
}

/**
 * A calendar budget refused the request: it is spent for its caller this period, whether or not
 * its last units were taken (a reservation larger than what is left is refused). Raised once;
 * every later refusal is known to this instance and costs nothing.
 */
export function alertIfRefused(env: ReporterEnv, ctx: Admitted, decision: DeniedDecision): void {
  const alerts = ctx.gen.alerts;
  if (!alerts || ctx.gen.runtime.alerts.thresholds.length === 0) return;
  for (const v of decision.violated) {
    if (!isCalendar(v) || v.key === undefined) continue;
    const used = v.limit.quota - v.outcome.remaining;
    alerts.raise(
      budgetCrossing(ctx, v, v.key, used, { event: "budget.exhausted", threshold: 1 }, env.clock.now()),
    );
  }
}

/** The calendar of a budget counted per calendar period; undefined for every other limit. */
function calendarOf(a: AppliedLimit): { unit: CalendarUnit; tz: string } | undefined {
  return a.spec.algorithm === "fixed_window" ? a.spec.calendar : undefined;
}

const isCalendar = (a: AppliedLimit) => calendarOf(a) !== undefined;

function budgetCrossing(
  ctx: Admitted,
  a: AppliedLimit,
  budgetKey: string,
  used: number,
  crossing: Crossing,
  atMs: number,
): BudgetCrossing {
  const spec = a.spec;
  const { unit, tz } = calendarOf(a)!;
  const end = periodAt(atMs, unit, tz).end;
  const usd = spec.unit === "usd";
  const caller = ctx.caller;
  return {
    budgetKey,
    caller: callerLabel(caller),
    tenant: caller.kind === "client" ? caller.tenant : undefined,
    limit: spec.name,
    unit: usd ? "usd" : spec.unit === "tokens" ? "tokens" : "requests",
    quota: usd ? usdOf(a.limit.quota) : a.limit.quota,
    used: usd ? usdOf(used) : used,
    period: periodId(atMs, unit, tz),
    periodEndMs: end,
    nextPeriod: periodId(end, unit, tz),
    atMs,
    crossing,
  };
}
