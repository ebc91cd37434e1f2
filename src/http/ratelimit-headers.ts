// The rate-limit headers of each style (SPEC §3), from the limits that applied to a request.
import type { AppliedLimit } from "../limits/decision.js";

export interface HeaderStyles {
  draft: boolean;
  ietf: boolean;
  legacy: boolean;
}

/** Whole seconds, rounded up, never below `min`. */
export function ceilSeconds(ms: number, min = 0): number {
  return Math.max(min, Math.ceil(ms / 1000));
}

/**
 * The limit a client should look at: one that denied, if any (the longest wait first: waiting out
 * another would only meet this one), else the fewest units left, ties to the longest wait. Units
 * are not comparable across limits (a token budget refused under max_cost still has thousands
 * left beside a request rate with a few), so a denial is never described by an allowing limit.
 */
export function mostRestrictive(applied: readonly AppliedLimit[]): AppliedLimit | undefined {
  let best: AppliedLimit | undefined;
  for (const a of applied) {
    if (!best) {
      best = a;
      continue;
    }
    const o = a.outcome;
    const b = best.outcome;
    if (o.allowed !== b.allowed) {
      if (!o.allowed) best = a;
      continue;
    }
    if (!o.allowed) {
      if (o.retryAfterMs > b.retryAfterMs || (o.retryAfterMs === b.retryAfterMs && o.remaining < b.remaining))
        best = a;
      continue;
    }
    if (o.remaining < b.remaining || (o.remaining === b.remaining && o.resetMs > b.resetMs)) best = a;
  }
  return best;
}

const hidden = (a: AppliedLimit) => a.spec.shadow === true || a.spec.unit === "usd";

/** Appends `name, value` pairs to `out` (a flat header list). */
export function rateLimitHeaders(
  appliedLimits: readonly AppliedLimit[],
  styles: HeaderStyles,
  nowMs: number,
  out: Record<string, string> = {},
): Record<string, string> {
  // Shadow limits are the operator's experiment: clients never see them. A money budget counts
  // micro-dollars, which no RateLimit field is written in: its 429 body and the admin API say
  // what it holds, in dollars.
  const applied = appliedLimits.some(hidden) ? appliedLimits.filter((a) => !hidden(a)) : appliedLimits;
  const top = mostRestrictive(applied);
  if (!top) return out;
  if (styles.draft) {
    out["ratelimit-limit"] = String(top.limit.quota);
    out["ratelimit-remaining"] = String(top.outcome.remaining);
    out["ratelimit-reset"] = String(ceilSeconds(top.outcome.resetMs));
  }
  if (styles.ietf) {
    out["ratelimit-policy"] = applied
      .map((a) => `"${a.spec.name}";q=${a.limit.quota};w=${a.limit.windowSeconds}`)
      .join(", ");
    out["ratelimit"] = applied
      .map((a) => `"${a.spec.name}";r=${a.outcome.remaining};t=${ceilSeconds(a.outcome.resetMs)}`)
      .join(", ");
  }
  if (styles.legacy) {
    out["x-ratelimit-limit"] = String(top.limit.quota);
    out["x-ratelimit-remaining"] = String(top.outcome.remaining);
    out["x-ratelimit-reset"] = String(Math.ceil((nowMs + top.outcome.resetMs) / 1000));
  }
  return out;
}
