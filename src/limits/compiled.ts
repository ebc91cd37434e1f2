// A spec made into a CompiledLimit: everything a request needs about a limit, computed once from
// its algorithm's entry (algorithms/).
import { ALGORITHMS } from "./algorithms/index.js";
import type { KeyBy } from "./key-by.js";
import type { CompiledLimit, LimitFacts, PlannedLimit } from "./plan.js";
import type { LimitSpec } from "./spec.js";
import { windowSeconds } from "./spec.js";

/** `localFraction`: the share of the limit one instance grants alone (store.local_fraction). */
export function compiledLimit(spec: LimitSpec, localFraction: number): CompiledLimit {
  const local = facts(ALGORITHMS[spec.algorithm].localShare(spec, localFraction));
  return Object.freeze({ ...facts(spec), local });
}

/**
 * A compiled limit keyed by `by`. A 429 says what the budget is kept per when that is not simply
 * the caller (`… per 1m, shared by every caller of the route`), never the value itself.
 */
export function plannedLimit(
  spec: LimitSpec,
  localFraction: number,
  by: KeyBy,
  tenantOnly: boolean,
  written?: Readonly<Record<string, unknown>>,
): PlannedLimit {
  const source = written === undefined ? {} : { written };
  if (by.scope !== undefined)
    return Object.freeze({ ...compiledLimit(spec, localFraction), by, tenantOnly, ...source });
  const kept = keptPer(by);
  const local = facts(ALGORITHMS[spec.algorithm].localShare(spec, localFraction), kept);
  return Object.freeze({ ...facts(spec, kept), local, by, tenantOnly, ...source });
}

function keptPer(by: KeyBy): string {
  if (by.parts.length === 1 && by.parts[0]!.kind === "route") return ", shared by every caller of the route";
  return `, kept per ${by.text}`;
}

function facts(spec: LimitSpec, suffix = ""): LimitFacts {
  const algorithm = ALGORITHMS[spec.algorithm];
  return Object.freeze({
    spec,
    description: algorithm.describe(spec) + suffix,
    quota: algorithm.quota(spec),
    windowSeconds: windowSeconds(spec),
  });
}
