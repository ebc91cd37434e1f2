// Which limits apply to a request, under which keys, and what the answer is when the store
// cannot give one. Failures are classified here, at the one place the store is called.
import type { CompiledRoute, LimitScope, PlannedLimit } from "../config/compile.js";
import type { Caller } from "../identity/caller.js";
import type { LimitCheck, LimitOutcome, LimitSpec } from "./spec.js";
import type { Store } from "./store.js";

export interface AppliedLimit {
  spec: LimitSpec;
  outcome: LimitOutcome;
}

export type DegradedReason = "timeout" | "store_error";

export type LimitDecision =
  | { kind: "unlimited" }
  | { kind: "allowed"; applied: AppliedLimit[] }
  | { kind: "denied"; applied: AppliedLimit[]; violated: AppliedLimit[]; retryAfterMs: number }
  | { kind: "degraded"; reason: DegradedReason; policy: "open" | "closed"; error: Error };

/** `{`, `}` and `:` structure the key (hash tag, separators); escape them in ids. */
export function keyPart(id: string): string {
  return /[{}:%\s]/.test(id)
    ? id.replace(/[{}:%\s]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`)
    : id;
}

/**
 * The key prefix of a scope. The hash tag is the tenant when the caller has one, so every limit
 * of a tenant's callers lives in one Redis Cluster slot; per-client limits add the client after it.
 */
export function scopeKey(scope: LimitScope, caller: Caller): string {
  // IP keys are canonical text built here (hex, digits, `.`, `:`, `/`): nothing to escape.
  if (scope === "ip" || caller.kind === "anonymous") return `{ip:${caller.ipKey}}:`;
  if (caller.tenant !== undefined) {
    const tag = `{t:${keyPart(caller.tenant)}}:`;
    return scope === "tenant" ? tag : `${tag}c:${keyPart(caller.id)}:`;
  }
  return `{c:${keyPart(caller.id)}}:`;
}

export function limitChecks(
  prefix: string,
  planned: readonly PlannedLimit[],
  caller: Caller,
  cost: number,
): LimitCheck[] {
  const checks: LimitCheck[] = [];
  for (const p of planned) {
    // A tenant limit binds callers that have a tenant; others have nothing to share it with.
    if (p.tenantOnly && (caller.kind !== "client" || caller.tenant === undefined)) continue;
    checks.push({ key: prefix + scopeKey(p.scope, caller) + p.spec.name, spec: p.spec, cost });
  }
  return checks;
}

export function classifyStoreError(err: unknown): DegradedReason {
  return err instanceof Error && /timed out|timeout/i.test(err.message) ? "timeout" : "store_error";
}

export class Limiter {
  constructor(
    private readonly store: Store,
    private readonly prefix: string,
  ) {}

  async check(caller: Caller, route: CompiledRoute): Promise<LimitDecision> {
    const planned = caller.plan?.limitsByRoute.get(route.name);
    if (!planned || planned.length === 0) return { kind: "unlimited" };
    const checks = limitChecks(this.prefix, planned, caller, route.cost);
    if (checks.length === 0) return { kind: "unlimited" };
    let decision: Awaited<ReturnType<Store["check"]>>;
    try {
      decision = await this.store.check(checks);
    } catch (err) {
      return {
        kind: "degraded",
        reason: classifyStoreError(err),
        policy: route.onFailure,
        error: err instanceof Error ? err : new Error(String(err)),
      };
    }
    const applied = checks.map((c, i) => ({ spec: c.spec, outcome: decision.outcomes[i]! }));
    if (decision.allowed) return { kind: "allowed", applied };
    const violated = applied.filter((a) => !a.outcome.allowed);
    const retryAfterMs = Math.max(...violated.map((v) => v.outcome.retryAfterMs));
    return { kind: "denied", applied, violated, retryAfterMs };
  }
}
