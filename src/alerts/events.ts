// Budget alerts: which events one charge crosses, what each delivery carries and how it is
// signed. Pure: no I/O, no clock but the instants passed in.
//
// A calendar budget (a fixed window of a day, a week or a month, in requests, tokens or dollars)
// crosses a threshold when the request that charged it took it from below `share × quota` to at
// or above it. Each event is claimed once per budget key, period and threshold across every
// instance (the ledger's claim, Redis SET NX), so a crossing that two requests make together, or
// a restart, delivers it once. `budget.exhausted` is the crossing of the whole quota.
import { createHmac } from "node:crypto";

// `budget.reset` is delivered when the period of a budget that was exhausted ends: it is queued
// with the exhausted event, due at the period's end.
export type AlertEvent = "budget.threshold" | "budget.exhausted" | "budget.reset";

/** One event a charge caused: what, and at which share of the quota (1 for exhausted). */
export interface Crossing {
  event: AlertEvent;
  threshold: number;
}

/**
 * The events a charge from `before` to `after` used units of `quota` crosses: every threshold
 * (a share, 0 < t ≤ 1) it passed, and exhausted once it reached the quota.
 */
export function crossings(
  thresholds: readonly number[],
  quota: number,
  before: number,
  after: number,
): Crossing[] {
  const out: Crossing[] = [];
  if (!(after > before) || !(quota > 0)) return out;
  for (const t of thresholds) {
    const at = Math.max(1, Math.ceil(t * quota));
    if (before < at && after >= at) out.push({ event: "budget.threshold", threshold: t });
  }
  if (before < quota && after >= quota) out.push({ event: "budget.exhausted", threshold: 1 });
  return out;
}

/** What a delivery's body says (Tollgate-Event names `event`; `id` is the same on every retry). */
export interface AlertBody {
  id: string;
  event: AlertEvent;
  caller: string;
  tenant: string | null;
  limit: string;
  period: string;
  /** In the budget's unit: requests, tokens, or dollars for a money budget. */
  unit: "requests" | "tokens" | "usd";
  used: number;
  quota: number;
  /** A share of the quota: 0.8 for 80 % (1 for exhausted, 0 for reset). */
  threshold: number;
  /** When it was crossed, ISO 8601. */
  time: string;
}

/** An event's id: one per budget key, period, event and threshold, whoever delivers it. */
export function alertId(budgetKey: string, period: string, c: Crossing): string {
  return createHmac("sha256", "tollgate-alert")
    .update(`${budgetKey}\n${period}\n${c.event}\n${c.threshold}`)
    .digest("base64url")
    .slice(0, 22);
}

/** `Tollgate-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, as a receiver checks it. */
export function signature(secret: string, body: string, unixSeconds: number): string {
  const v1 = createHmac("sha256", secret).update(`${unixSeconds}.${body}`).digest("hex");
  return `t=${unixSeconds},v1=${v1}`;
}
