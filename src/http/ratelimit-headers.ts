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

/** The limit a client should look at: the fewest units left; ties go to the longest wait. */
export function mostRestrictive(applied: readonly AppliedLimit[]): AppliedLimit | undefined {
  let best: AppliedLimit | undefined;
  for (const a of applied) {
    if (
      !best ||
      a.outcome.remaining < best.outcome.remaining ||
      (a.outcome.remaining === best.outcome.remaining && a.outcome.resetMs > best.outcome.resetMs)
    ) {
      best = a;
    }
  }
  return best;
}

/** Appends `name, value` pairs to `out` (a flat header list). */
export function rateLimitHeaders(
  appliedLimits: readonly AppliedLimit[],
  styles: HeaderStyles,
  nowMs: number,
  out: Record<string, string> = {},
): Record<string, string> {
  // Shadow limits are the operator's experiment: clients never see them.
  const applied = appliedLimits.some((a) => a.spec.shadow)
    ? appliedLimits.filter((a) => !a.spec.shadow)
    : appliedLimits;
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
