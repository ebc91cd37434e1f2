// Which limits apply to a request, under which keys, and what the answer is when the store
// cannot give one. Failures are classified here, at the one place the store is called.
import type { CompiledRoute, LimitScope, PlannedLimit } from "../config/compile.js";
import type { Caller } from "../identity/caller.js";
import { BreakerOpenError } from "./breaker.js";
import type { LimitCheck, LimitOutcome, LimitSpec, StoreDecision } from "./spec.js";
import type { Store } from "./store.js";
import type { MemoryStore } from "./stores/memory.js";
import { StoreReplyError, StoreTimeoutError } from "./stores/redis.js";

export interface AppliedLimit {
  spec: LimitSpec;
  outcome: LimitOutcome;
}

/** Why the store gave no decision: the labels of tollgate_store_errors_total. */
export type DegradedReason = "timeout" | "connection" | "script" | "breaker_open";

export type LimitDecision =
  | { kind: "unlimited" }
  /** `degraded` is set when the in-process fallback decided (on_failure: local). */
  | { kind: "allowed"; applied: AppliedLimit[]; checks: LimitCheck[]; degraded?: DegradedReason }
  | {
      kind: "denied";
      applied: AppliedLimit[];
      violated: AppliedLimit[];
      retryAfterMs: number;
      degraded?: DegradedReason;
    }
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

/** The one place store failures are classified. */
export function classifyStoreError(err: unknown): DegradedReason {
  if (err instanceof BreakerOpenError) return "breaker_open";
  if (err instanceof StoreTimeoutError) return "timeout";
  if (err instanceof StoreReplyError) return "script";
  const e = err as { name?: string; message?: string };
  // Redis answered with an error (ReplyError): the script or the server refused the call.
  if (e?.name === "ReplyError") return "script";
  if (/timed out|timeout/i.test(e?.message ?? "")) return "timeout";
  return "connection";
}

export interface LocalFallback {
  store: MemoryStore;
  /** Share of each limit one instance grants alone (store.local_fraction). */
  fraction: number;
}

/**
 * The limit one instance enforces alone while the store is away: `fraction` of the burst
 * (at least 1) refilled at `fraction` of the rate, or `fraction` of a window's limit.
 * Cached per spec: specs are immutable.
 */
const localSpecs = new WeakMap<LimitSpec, Map<number, LimitSpec>>();
export function localSpec(spec: LimitSpec, fraction: number): LimitSpec {
  let byFraction = localSpecs.get(spec);
  if (!byFraction) {
    byFraction = new Map();
    localSpecs.set(spec, byFraction);
  }
  let local = byFraction.get(fraction);
  if (!local) {
    local =
      spec.algorithm === "token_bucket"
        ? {
            ...spec,
            burst: Math.max(1, Math.floor(spec.burst * fraction)),
            intervalMs: spec.intervalMs / fraction,
          }
        : { ...spec, limit: Math.max(1, Math.floor(spec.limit * fraction)) };
    byFraction.set(fraction, local);
  }
  return local;
}

export class Limiter {
  constructor(
    private readonly store: Store,
    private readonly prefix: string,
    private readonly local?: LocalFallback,
  ) {}

  async check(caller: Caller, route: CompiledRoute): Promise<LimitDecision> {
    const planned = caller.plan?.limitsByRoute.get(route.name);
    if (!planned || planned.length === 0) return { kind: "unlimited" };
    const checks = limitChecks(this.prefix, planned, caller, route.cost);
    if (checks.length === 0) return { kind: "unlimited" };
    let decision: StoreDecision;
    try {
      decision = await this.store.check(checks);
    } catch (err) {
      const reason = classifyStoreError(err);
      if (route.onFailure === "local" && this.local) {
        const { store, fraction } = this.local;
        const localChecks = checks.map((c) => ({ ...c, spec: localSpec(c.spec, fraction) }));
        return toDecision(localChecks, store.checkSync(localChecks), reason);
      }
      return {
        kind: "degraded",
        reason,
        policy: route.onFailure === "closed" ? "closed" : "open",
        error: err instanceof Error ? err : new Error(String(err)),
      };
    }
    return toDecision(checks, decision);
  }

  /**
   * Debits `extraUnits` more from the limits a request was admitted under (the upstream's
   * Tollgate-Cost beyond the route's cost). Resolves either way: a failed debit is reported,
   * never turned into a failed response.
   */
  async postCharge(
    checks: readonly LimitCheck[],
    extraUnits: number,
  ): Promise<{ ok: true } | { ok: false; reason: DegradedReason }> {
    try {
      await this.store.charge(checks.map((c) => ({ ...c, cost: extraUnits })));
      return { ok: true };
    } catch (err) {
      return { ok: false, reason: classifyStoreError(err) };
    }
  }
}

/** `checks` is the request's own array (built per request), kept for a post-charge, not copied. */
function toDecision(checks: LimitCheck[], decision: StoreDecision, degraded?: DegradedReason): LimitDecision {
  const applied = checks.map((c, i) => ({ spec: c.spec, outcome: decision.outcomes[i]! }));
  if (decision.allowed) {
    return degraded ? { kind: "allowed", applied, checks, degraded } : { kind: "allowed", applied, checks };
  }
  const violated = applied.filter((a) => !a.outcome.allowed);
  const retryAfterMs = Math.max(...violated.map((v) => v.outcome.retryAfterMs));
  return degraded
    ? { kind: "denied", applied, violated, retryAfterMs, degraded }
    : { kind: "denied", applied, violated, retryAfterMs };
}
