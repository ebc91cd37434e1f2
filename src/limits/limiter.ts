// Which limits apply to a request, under which keys, and what the answer is when the store
// cannot give one. The store it is given is already decorated (gateway-limiter.ts: reservations,
// deny cache, breaker); failures get their reason at this one call site, by type (errors.ts).
import { storeFailureReason } from "../errors.js";
import type { Caller } from "../identity/caller.js";
import { isRateLimit } from "./algorithms/index.js";
import { type BudgetReservation, fitOutput, reservedUnits } from "./budget-reservation.js";
import type {
  AllowedDecision,
  AppliedLimit,
  DegradedReason,
  DeniedDecision,
  LimitDecision,
} from "./decision.js";
import { DenialRecords } from "./denials.js";
import { type KeyedRequest, readsBody } from "./key-by.js";
import { type LeaseHolder, leaseOf, nextLeaseId, releaseOnce } from "./leases.js";
import { type LocalDecider, localChecks } from "./local-fallback.js";
import type { LimitedRoute, PlannedLimit } from "./plan.js";
import { type BudgetUnit, decidedAtOf, isBudget, type LimitCheck, type StoreDecision } from "./spec.js";
import { binds, requestLimitKey } from "./state-keys.js";
import type {
  ChargedLimit,
  CheckOptions,
  DenialLog,
  DenialRecord,
  Lease,
  LimitStore,
} from "./stores/contract.js";

/** The deny cache in front of the store, as far as the admin API and a reload need it. */
export interface LocalDenials {
  /** A denial known without the store (DenyCacheStore.known), recorded; null: the store decides. */
  known?(checks: readonly LimitCheck[], options?: CheckOptions): StoreDecision | null;
  flushDenials(): Promise<void>;
  forget(keys: Iterable<string>): void;
  close(): Promise<void>;
}

export interface LimiterOptions {
  /** Decides every request, behind whatever decorators the gateway put in front of the store. */
  store: LimitStore;
  /** Key prefix in the store (store.prefix). */
  prefix: string;
  /** Decides alone for routes with on_failure: local while the store cannot. */
  local?: LocalDecider;
  /** The deny cache among the store's decorators, if there is one. */
  denyCache?: LocalDenials;
  /** This instance's clock (the top-list bucket of a denial record). */
  now?: () => number;
  /** Operators' runtime overrides of callers' limits (operator-state/override-table.ts), if any. */
  overrides?: CallerOverrides;
  /**
   * Where a denial the store was not asked to record is written: a clamped request's first
   * check goes without its record (it may still be admitted, lowered), and its refusal is
   * recorded here. Absent: such refusals go unrecorded.
   */
  denialLog?: Pick<DenialLog, "recordDenials">;
}

/**
 * Sizes an operator set for one caller at runtime, over the compiled ones. The limiter asks once
 * per request; a caller without an override must cost no more than a Map lookup.
 */
export interface CallerOverrides {
  /**
   * `planned` with this caller's overridden limits in its place (the same name, `by` and key, a
   * new size), or `planned` itself when none applies. The list returned is not modified.
   */
  apply(caller: Caller, planned: readonly PlannedLimit[]): readonly PlannedLimit[];
}

const UNLIMITED: LimitDecision = Object.freeze({ kind: "unlimited" });

export class Limiter {
  private readonly store: LimitStore;
  private readonly prefix: string;
  private readonly local: LocalDecider | undefined;
  private readonly denyCache: LocalDenials | undefined;
  private readonly now: () => number;
  private readonly records: DenialRecords;
  private readonly overrides: CallerOverrides | undefined;
  private readonly denialLog: Pick<DenialLog, "recordDenials"> | undefined;

  constructor(options: LimiterOptions) {
    this.store = options.store;
    this.prefix = options.prefix;
    this.local = options.local;
    this.denyCache = options.denyCache;
    this.now = options.now ?? Date.now;
    this.records = new DenialRecords(options.prefix);
    this.overrides = options.overrides;
    this.denialLog = options.denialLog;
  }

  /**
   * The decision on every limit that binds this request: its plan's (global, tenant, the
   * route's entry) and the route's own, in one store call. `request` is what keyed limits read;
   * without it their values are missing and they key by the caller. `reservation`: an AI
   * request's, which its budgets take in the same call (budget-reservation.ts); with a
   * `minOutput` a request its budgets cannot hold is lowered to what they can, down to it.
   *
   * A request no limit binds is answered at once, without a promise: the pipeline then goes on
   * in the same turn, as it does for an exempt caller, instead of paying a promise and a
   * microtask for an answer known already.
   */
  check(
    caller: Caller,
    route: LimitedRoute,
    request?: KeyedRequest,
    reservation?: BudgetReservation,
  ): LimitDecision | Promise<LimitDecision> {
    // A plan's list for a route ends with the route's own limits (config/compile.ts).
    const compiled = caller.plan?.limitsByRoute.get(route.name) ?? route.limits;
    if (compiled.length === 0) return UNLIMITED;
    return this.checkLimits(caller, route, compiled, request, reservation);
  }

  private async checkLimits(
    caller: Caller,
    route: LimitedRoute,
    compiled: readonly PlannedLimit[],
    request: KeyedRequest | undefined,
    reservation: BudgetReservation | undefined,
  ): Promise<LimitDecision> {
    // Overrides replace limits in place, so everything below (keys, headers, 429 wording, the
    // local fallback's share) reads the size in force for this caller.
    const overridden = this.overrides ? this.overrides.apply(caller, compiled) : compiled;
    // A money budget is asked only by AI requests, the only ones priced.
    const planned = reservation === undefined ? withoutMoney(overridden) : overridden;
    const checks = limitChecks(this.prefix, planned, caller, route, request, reservation);
    if (checks.length === 0) return UNLIMITED;
    const record = this.records.of(caller, route, this.now());
    const clamps = reservation?.minOutput !== undefined && checks.some((c) => isBudget(c.spec));
    // A denial is written by the same store call that decides it; a request that may be lowered
    // is written only once it is refused for good.
    const first = await this.decide(planned, caller, route, checks, clamps ? undefined : record, reservation);
    if (!clamps || first.kind !== "denied") return first;
    const output = clampedOutput(first, checks, reservation!);
    if (output === undefined) {
      this.recordRefusal(record, first);
      return first;
    }
    const lowered = limitChecks(this.prefix, planned, caller, route, request, reservation, output);
    return this.decide(planned, caller, route, lowered, record, reservation, output);
  }

  /**
   * A refusal this instance already knows for a request whose body is not read yet (an AI
   * route's): its limits that do not key by the body, each at the least it could take (a rate
   * its route's cost, a budget one unit), asked of the deny cache alone. A caller hammering past
   * a limit is so refused before the gateway reads, holds and parses its body. Undefined: the
   * body is read, and the store decides.
   */
  knownDenial(caller: Caller, route: LimitedRoute, request?: KeyedRequest): DeniedDecision | undefined {
    if (!this.denyCache?.known) return undefined;
    const compiled = caller.plan?.limitsByRoute.get(route.name) ?? route.limits;
    if (compiled.length === 0) return undefined;
    const overridden = this.overrides ? this.overrides.apply(caller, compiled) : compiled;
    const planned = withoutMoney(overridden).filter((p) => !readsBody(p.by));
    const checks = limitChecks(this.prefix, planned, caller, route, request);
    for (const c of checks) if (isBudget(c.spec)) c.cost = 1;
    if (checks.length === 0) return undefined;
    const known = this.denyCache.known(checks, { denial: this.records.of(caller, route, this.now()) });
    if (!known) return undefined;
    const decision = toDecision(planned, caller, checks, known, this.store);
    return decision.kind === "denied" ? decision : undefined;
  }

  /** One store call for `checks`, as a decision (the failure policy when the store cannot decide). */
  private async decide(
    planned: readonly PlannedLimit[],
    caller: Caller,
    route: LimitedRoute,
    checks: LimitCheck[],
    record: DenialRecord | undefined,
    reservation: BudgetReservation | undefined,
    output = reservation?.output,
  ): Promise<LimitDecision> {
    let decision: StoreDecision;
    try {
      decision = await this.store.check(checks, record ? { denial: record } : undefined);
    } catch (err) {
      const reason = storeFailureReason(err);
      if (route.onFailure === "local" && this.local) {
        const local = localChecks(planned, caller, checks);
        return toDecision(planned, caller, local, this.local.checkSync(local), this.local, reason);
      }
      const policy = route.onFailure === "closed" ? "closed" : "open";
      return { kind: "degraded", reason, policy, error: err instanceof Error ? err : new Error(String(err)) };
    }
    const answer = toDecision(planned, caller, checks, decision, this.store);
    if (answer.kind === "allowed" && output !== undefined) answer.output = output;
    return answer;
  }

  /** A clamped request refused after all: its denial, written as the store would have. */
  private recordRefusal(record: DenialRecord, denied: LimitDecision & { kind: "denied" }): void {
    if (!this.denialLog) return;
    const limits = denied.violated.map((v) => v.spec.name);
    this.denialLog
      .recordDenials([
        { ...record, entries: [{ atMs: Math.floor(this.now()), route: record.route, limits }] },
      ])
      .catch(() => {
        // Advisory, as every denial record: a store that cannot take it drops it.
      });
  }

  /**
   * Settles a request's budgets once its answer is known: `deltas[i]` more units for check i
   * (what the upstream reported beyond the reservation: debited whatever is left, as a
   * post-charge), or fewer (the reservation beyond what was used: given back to the window it
   * was taken from). 0 leaves a check as it is. Resolves either way; `charged` holds the state
   * after a debit (undefined where none was made).
   */
  async settle(
    checks: readonly LimitCheck[],
    decidedAt: StoreDecision["decidedAt"],
    deltas: readonly number[],
  ): Promise<{ ok: true; charged: (ChargedLimit | undefined)[] } | { ok: false; reason: DegradedReason }> {
    const debits: LimitCheck[] = [];
    const debited: number[] = [];
    const giveBacks = [];
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const delta = deltas[i] ?? 0;
      if (delta > 0) {
        debits.push({ key: c.key, spec: c.spec, cost: delta, leaseId: c.leaseId });
        debited.push(i);
      } else if (delta < 0) {
        const at = decidedAtOf(decidedAt, i);
        if (at !== undefined) giveBacks.push({ check: c, units: -delta, at });
      }
    }
    const charged: (ChargedLimit | undefined)[] = checks.map(() => undefined);
    try {
      const [states] = await Promise.all([
        debits.length > 0 ? this.store.charge(debits) : Promise.resolve([]),
        giveBacks.length > 0 ? this.store.refund(giveBacks) : Promise.resolve(),
      ]);
      states.forEach((state, j) => {
        charged[debited[j]!] = state;
      });
      return { ok: true, charged };
    } catch (err) {
      return { ok: false, reason: storeFailureReason(err) };
    }
  }

  /**
   * Debits `extraUnits` more from the limits a request was admitted under (what the upstream
   * reported beyond the route's cost): every one of them, or only its token budgets (`unit:
   * tokens`) when the config has any. `charged` is aligned with `checks` (undefined: not
   * charged). Resolves either way: a failed debit is reported, never turned into a failed
   * response.
   */
  async postCharge(
    checks: readonly LimitCheck[],
    extraUnits: number,
    which: "all" | "tokens" = "all",
  ): Promise<{ ok: true; charged: (ChargedLimit | undefined)[] } | { ok: false; reason: DegradedReason }> {
    const charging = which === "all" ? checks : checks.filter((c) => c.spec.unit === "tokens");
    if (charging.length === 0) return { ok: true, charged: checks.map(() => undefined) };
    try {
      const charged = await this.store.charge(
        // Spelled out: a spread plus a key the check may lack takes V8's slow path.
        charging.map((c) => ({ key: c.key, spec: c.spec, cost: extraUnits, leaseId: c.leaseId })),
      );
      if (charging === checks) return { ok: true, charged };
      let j = 0;
      return { ok: true, charged: checks.map((c) => (c.spec.unit === "tokens" ? charged[j++] : undefined)) };
    } catch (err) {
      return { ok: false, reason: storeFailureReason(err) };
    }
  }

  /**
   * One store call for checks built outside the plans (Envoy's rate-limit service, src/rls/),
   * through the same decorators as a request's (deny cache, breaker). Rejects as the store does;
   * the caller applies its failure policy (storeFailureReason names why).
   */
  checkChecks(checks: LimitCheck[]): Promise<StoreDecision> {
    return this.store.check(checks);
  }

  /** The same checks decided by the in-process fallback (on_failure: local); undefined without one. */
  checkLocally(checks: readonly LimitCheck[]): StoreDecision | undefined {
    return this.local?.checkSync(checks);
  }

  /** Writes the denials the deny cache decided (every second, and before the admin API reads). */
  flushDenials(): Promise<void> {
    return this.denyCache ? this.denyCache.flushDenials() : Promise.resolve();
  }

  /** Forgets what the deny cache knows of these keys (an operator reset them). */
  forgetDenials(keys: Iterable<string>): void {
    this.denyCache?.forget(keys);
  }

  /** Stops the deny cache's flush after a last flush (a reload replaced this limiter, or shutdown). */
  async close(): Promise<void> {
    await this.denyCache?.close();
  }
}

/**
 * The checks of the limits that bind this request, in plan order, each under its key. With a
 * reservation (an AI request) each budget takes its share of it at `output` tokens per choice;
 * without one a token budget takes the route's cost, allowed only if its max_cost would be.
 */
export function limitChecks(
  prefix: string,
  planned: readonly PlannedLimit[],
  caller: Caller,
  route: Pick<LimitedRoute, "name" | "cost" | "maxCost">,
  request?: KeyedRequest,
  reservation?: BudgetReservation,
  output = reservation?.output,
): LimitCheck[] {
  const checks: LimitCheck[] = [];
  const cost = route.cost;
  const need = route.maxCost !== undefined && route.maxCost > cost ? route.maxCost : undefined;
  for (const p of planned) {
    if (!binds(p, caller)) continue;
    const unit = p.spec.unit;
    const key = requestLimitKey(prefix, p.by, p.spec.name, caller, route.name, request);
    checks.push(
      !isRateLimit(p.spec)
        ? { key, spec: p.spec, cost, leaseId: nextLeaseId() }
        : unit !== undefined && reservation !== undefined
          ? { key, spec: p.spec, cost: reservedUnits(reservation, unit, output) }
          : need !== undefined && unit === "tokens"
            ? { key, spec: p.spec, cost, need }
            : { key, spec: p.spec, cost },
    );
  }
  return checks;
}

/** `planned` without its money budgets (the same list when it has none: no copy per request). */
function withoutMoney(planned: readonly PlannedLimit[]): readonly PlannedLimit[] {
  for (const p of planned) if (p.spec.unit === "usd") return planned.filter((q) => q.spec.unit !== "usd");
  return planned;
}

/**
 * The output a refused request can be lowered to: only when budgets alone refused it (a rate
 * that denied is not helped by fewer tokens), from what each budget reported it has left.
 */
function clampedOutput(
  denied: LimitDecision & { kind: "denied" },
  checks: readonly LimitCheck[],
  reservation: BudgetReservation,
): number | undefined {
  if (denied.violated.some((v) => !isBudget(v.spec))) return undefined;
  const budgets: { unit: BudgetUnit; remaining: number }[] = [];
  if (denied.local) {
    // The deny cache answered: it knows only the budgets it denied (the lowered check asks the
    // store, which decides for all of them).
    for (const v of denied.violated) budgets.push({ unit: v.spec.unit!, remaining: v.outcome.remaining });
  } else {
    for (let i = 0; i < checks.length; i++) {
      const unit = checks[i]!.spec.unit;
      if (unit === undefined) continue;
      budgets.push({ unit, remaining: denied.applied[i]!.outcome.remaining });
    }
  }
  const fit = fitOutput(reservation, budgets);
  return fit !== undefined && fit < reservation.output ? fit : undefined;
}

/**
 * `checks` is the request's own array (built per request), kept for a post-charge, not copied;
 * its i-th check is the i-th planned limit that binds the caller. `store` is the one that decided:
 * leases go back to it. A deny-cache answer (`local`) is read by its denials only.
 */
function toDecision(
  planned: readonly PlannedLimit[],
  caller: Caller,
  checks: LimitCheck[],
  decision: StoreDecision,
  store: LeaseHolder,
  degraded?: DegradedReason,
): LimitDecision {
  const applied: AppliedLimit[] = [];
  let j = 0;
  for (const limit of planned) {
    if (!binds(limit, caller)) continue;
    // The local fallback decided by each limit's local share: the answer describes that share.
    const facts = degraded ? limit.local : limit;
    applied.push({ limit: facts, spec: facts.spec, outcome: decision.outcomes[j]!, key: checks[j]!.key });
    j++;
  }
  if (decision.allowed) {
    let delayMs = 0;
    let leases: Lease[] | undefined;
    for (let i = 0; i < checks.length; i++) {
      const delay = decision.outcomes[i]!.delayMs;
      if (delay !== undefined && delay > delayMs) delayMs = delay;
      const lease = leaseOf(checks[i]!);
      if (!lease) continue;
      leases ??= [];
      leases.push(lease);
    }
    const allowed: AllowedDecision = { kind: "allowed", applied, checks, delayMs };
    if (decision.decidedAt !== undefined) allowed.decidedAt = decision.decidedAt;
    if (leases) allowed.release = releaseOnce(store, leases);
    for (const a of applied) {
      if (!a.spec.shadow || a.outcome.allowed) continue;
      allowed.shadowLimited ??= [];
      allowed.shadowLimited.push(a);
    }
    if (degraded) allowed.degraded = degraded;
    return allowed;
  }
  const violated = applied.filter((a) => !a.outcome.allowed && !a.spec.shadow);
  const retryAfterMs = Math.max(...violated.map((v) => v.outcome.retryAfterMs));
  if (decision.local) return { kind: "denied", applied: violated, violated, retryAfterMs, local: true };
  return degraded
    ? { kind: "denied", applied, violated, retryAfterMs, degraded }
    : { kind: "denied", applied, violated, retryAfterMs };
}
