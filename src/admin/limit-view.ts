// How the admin API writes one limit's state, the same in every answer that shows one
// (GET /admin/callers/…, GET /admin/limits/…): scripts read one shape.
import type { PlannedLimit } from "../limits/plan.js";
import { type LimitCheck, quota } from "../limits/spec.js";
import type { ChargedLimit } from "../limits/stores/contract.js";

/** A limit under one key, as a zero-cost check saw it. */
export function limitState(check: LimitCheck, view: ChargedLimit) {
  return {
    name: check.spec.name,
    algorithm: check.spec.algorithm,
    limit: quota(check.spec),
    remaining: view.remaining,
    reset_seconds: Math.ceil(view.resetMs / 1000),
    shadow: check.spec.shadow === true,
    key: check.key,
  };
}

/** A limit with no one key to read (kept per request values): what it is, not its state. */
export function limitFacts(limit: PlannedLimit) {
  return {
    name: limit.spec.name,
    by: limit.by.text,
    algorithm: limit.spec.algorithm,
    limit: limit.quota,
    shadow: limit.spec.shadow === true,
  };
}
