// A spec made into a CompiledLimit: everything a request needs about a limit, computed once.
import type { CompiledLimit } from "./plan.js";
import type { LimitSpec } from "./spec.js";
import { describeSpec, localSpec, quota, windowSeconds } from "./spec.js";

/** `localFraction`: the share of the limit one instance grants alone (store.local_fraction). */
export function compiledLimit(spec: LimitSpec, localFraction: number): CompiledLimit {
  return Object.freeze({
    spec,
    description: describeSpec(spec),
    quota: quota(spec),
    windowSeconds: windowSeconds(spec),
    local: localSpec(spec, localFraction),
  });
}
