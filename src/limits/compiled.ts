// A spec made into a CompiledLimit: everything a request needs about a limit, computed once from
// its algorithm's entry (algorithms/).
import { ALGORITHMS } from "./algorithms/index.js";
import type { CompiledLimit, LimitFacts } from "./plan.js";
import type { LimitSpec } from "./spec.js";
import { windowSeconds } from "./spec.js";

/** `localFraction`: the share of the limit one instance grants alone (store.local_fraction). */
export function compiledLimit(spec: LimitSpec, localFraction: number): CompiledLimit {
  const local = facts(ALGORITHMS[spec.algorithm].localShare(spec, localFraction));
  return Object.freeze({ ...facts(spec), local });
}

function facts(spec: LimitSpec): LimitFacts {
  const algorithm = ALGORITHMS[spec.algorithm];
  return Object.freeze({
    spec,
    description: algorithm.describe(spec),
    quota: algorithm.quota(spec),
    windowSeconds: windowSeconds(spec),
  });
}
