// `on_failure: local`: while the store cannot answer, this instance decides alone with its share
// of each limit (PlannedLimit.local, compiled from store.local_fraction). The decider is an
// in-process store the gateway injects and keeps across reloads, so an outage does not restart
// its counting; it is synchronous, so a fallback decision costs no extra turn of the event loop.
import type { Caller } from "../identity/caller.js";
import type { LeaseHolder } from "./leases.js";
import type { PlannedLimit } from "./plan.js";
import type { LimitCheck, StoreDecision } from "./spec.js";
import { binds } from "./state-keys.js";

/** Decides in this process, by its own clock; holds the leases it grants (the memory store). */
export interface LocalDecider extends LeaseHolder {
  checkSync(checks: readonly LimitCheck[]): StoreDecision;
}

/**
 * The request's checks under the local specs: the same keys (the local store is its own) and
 * lease ids. Built field by field: a reservation's `batch` mark must not reach the local share,
 * which would then hand a whole batch to each request.
 */
export function localChecks(
  planned: readonly PlannedLimit[],
  caller: Caller,
  checks: readonly LimitCheck[],
): LimitCheck[] {
  const local: LimitCheck[] = [];
  let j = 0;
  for (const p of planned) {
    if (!binds(p, caller)) continue;
    const c = checks[j++]!;
    local.push(
      c.leaseId === undefined
        ? { key: c.key, spec: p.local.spec, cost: c.cost }
        : { key: c.key, spec: p.local.spec, cost: c.cost, leaseId: c.leaseId },
    );
  }
  return local;
}
