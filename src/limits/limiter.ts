// Which limits apply to a request, under which keys, and what the answer is when the store
// cannot give one. Failures are classified here, at the one place the store is called.
import { randomBytes } from "node:crypto";
import type { CompiledRoute } from "../config/compile.js";
import type { Caller } from "../identity/caller.js";
import { BreakerOpenError } from "./breaker.js";
import { DenyCache, type LocalDenial } from "./deny-cache.js";
import type { LimitScope, PlannedLimit } from "./plan.js";
import type { LimitCheck, LimitOutcome, LimitSpec, StoreDecision } from "./spec.js";
import {
  type ChargedLimit,
  DENIAL_LOG_MAX,
  type DenialBatch,
  type DenialRecord,
  type Lease,
  type Store,
  TOP_BUCKET_MS,
} from "./store.js";
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
  /**
   * `degraded` is set when the in-process fallback decided (on_failure: local). `delayMs`: how
   * long a leaky bucket makes the request wait for its slot. `release` is present when the
   * request holds concurrency leases: call it once when the request ends, however it ends.
   */
  | {
      kind: "allowed";
      applied: AppliedLimit[];
      checks: LimitCheck[];
      delayMs: number;
      /** Shadow limits that would have denied this request (it was let through). */
      shadowLimited?: AppliedLimit[];
      release?: () => Promise<StoreResult>;
      degraded?: DegradedReason;
    }
  | {
      kind: "denied";
      applied: AppliedLimit[];
      violated: AppliedLimit[];
      retryAfterMs: number;
      degraded?: DegradedReason;
      /** Decided by the deny cache, without asking the store. */
      local?: true;
    }
  | { kind: "degraded"; reason: DegradedReason; policy: "open" | "closed"; error: Error };

export type StoreResult = { ok: true } | { ok: false; reason: DegradedReason };

/**
 * Lease ids: unique across instances (a random instance part) and cheap per request (a counter).
 * The same id never reaches two requests, so one request's release never frees another's slot.
 */
const LEASE_INSTANCE = randomBytes(9).toString("base64url");
let leaseSequence = 0;
export function nextLeaseId(): string {
  leaseSequence = (leaseSequence + 1) % Number.MAX_SAFE_INTEGER;
  return `${LEASE_INSTANCE}:${leaseSequence.toString(36)}`;
}

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
    const key = prefix + scopeKey(p.scope, caller) + p.spec.name;
    checks.push(
      p.spec.algorithm === "concurrency"
        ? { key, spec: p.spec, cost, leaseId: nextLeaseId() }
        : { key, spec: p.spec, cost },
    );
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
    local = scaledSpec(spec, fraction);
    byFraction.set(fraction, local);
  }
  return local;
}

function scaledSpec(spec: LimitSpec, fraction: number): LimitSpec {
  const share = (n: number) => Math.max(1, Math.floor(n * fraction));
  switch (spec.algorithm) {
    case "token_bucket":
      return { ...spec, burst: share(spec.burst), intervalMs: spec.intervalMs / fraction };
    case "leaky_bucket":
      // The queue may be 0 (serve one at a time, queue none): its share stays 0 then.
      return { ...spec, queue: Math.floor(spec.queue * fraction), intervalMs: spec.intervalMs / fraction };
    case "concurrency":
      return { ...spec, maxInFlight: share(spec.maxInFlight) };
    default:
      return { ...spec, limit: share(spec.limit) };
  }
}

/** Per planned list and limit count: the "<route>\t<limit names…>" of denial records. */
const recordTails = new WeakMap<readonly PlannedLimit[], Map<number, string>>();

/** How often denials decided by the deny cache are written to the store. */
export const DENIAL_FLUSH_MS = 1000;

export interface LimiterOptions {
  /** Deny repeat requests locally once the store denied them (shared stores only). */
  denyCache?: boolean;
}

function isBatched(p: PlannedLimit): boolean {
  return p.spec.algorithm === "token_bucket" && p.spec.batch !== undefined;
}

/** How long an instance keeps tokens it reserved for a `batch: N` limit. */
export const RESERVATION_MS = 1000;
const RESERVATIONS_MAX = 100_000;

interface Reservation {
  tokens: number;
  expiresAtMs: number;
  /** The store's remaining and reset when the batch was taken, for the response headers. */
  remaining: number;
  resetAtMs: number;
}

export class Limiter {
  private readonly reservations = new Map<string, Reservation>();
  private readonly refills = new Map<string, Promise<void>>();
  private topBucket = -1;
  private topKey = "";
  private readonly denyCache: DenyCache | null;
  /** Denials the deny cache decided, per caller log key, until the next flush. */
  private pending = new Map<string, DenialBatch>();
  private readonly flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Store,
    private readonly prefix: string,
    private readonly local?: LocalFallback,
    options: LimiterOptions = {},
  ) {
    this.denyCache = options.denyCache ? new DenyCache() : null;
    if (this.denyCache) {
      this.flushTimer = setInterval(() => void this.flushDenials(), DENIAL_FLUSH_MS);
      this.flushTimer.unref();
    }
  }

  async check(caller: Caller, route: CompiledRoute, nowMs: number = Date.now()): Promise<LimitDecision> {
    const planned = caller.plan?.limitsByRoute.get(route.name);
    if (!planned || planned.length === 0) return { kind: "unlimited" };
    const checks = limitChecks(this.prefix, planned, caller, route.cost);
    if (checks.length === 0) return { kind: "unlimited" };
    const local = this.denyCache?.check(checks, nowMs);
    if (local) return this.deniedLocally(caller, route, checks, local, nowMs);
    // Reservations only concern `batch: N` limits: other requests skip that work entirely.
    const batched = planned.some(isBatched);
    if (batched) {
      // One refill per batched key at a time: requests that find the reservation short wait
      // for the refill in flight instead of each taking a batch of their own.
      let waited = false;
      for (let refill = this.refillInFlight(checks, nowMs); refill; ) {
        await refill;
        waited = true;
        refill = this.refillInFlight(checks, nowMs);
      }
      // The refill may have found the bucket empty: its denial now answers this request too.
      const deniedMeanwhile = waited ? this.denyCache?.check(checks, nowMs) : null;
      if (deniedMeanwhile) return this.deniedLocally(caller, route, checks, deniedMeanwhile, nowMs);
    }
    const reserved = batched ? this.takeReserved(checks, nowMs) : null;
    const toStore = reserved ? checks.filter((_, i) => !reserved.has(i)) : checks;
    const refilled = batched ? this.startRefills(toStore) : undefined;
    let decision: StoreDecision;
    try {
      decision =
        toStore.length === 0
          ? { allowed: true, outcomes: [] }
          : await this.store.check(
              toStore,
              undefined,
              this.denialRecord(caller, route, toStore === checks ? planned : null, toStore, nowMs),
            );
      // `nowMs` is when the check was sent: never later than when the store decided.
      if (!decision.allowed) this.denyCache?.remember(toStore, decision.outcomes, nowMs);
      if (reserved) decision = this.mergeReserved(checks, toStore, reserved, decision);
      else if (batched) this.keepReserved(checks, decision, nowMs);
      refilled?.();
    } catch (err) {
      refilled?.();
      if (reserved) this.giveBack(checks, reserved);
      const reason = classifyStoreError(err);
      if (route.onFailure === "local" && this.local) {
        const { store, fraction } = this.local;
        const localChecks = checks.map((c) => ({ ...c, spec: localSpec(c.spec, fraction) }));
        return toDecision(localChecks, store.checkSync(localChecks), store, reason);
      }
      return {
        kind: "degraded",
        reason,
        policy: route.onFailure === "closed" ? "closed" : "open",
        error: err instanceof Error ? err : new Error(String(err)),
      };
    }
    return toDecision(checks, decision, this.store);
  }

  /**
   * `batch: N` token buckets: a request takes its tokens from this instance's reservation when
   * it holds enough; otherwise its check asks the store for up to N at once (at least its
   * cost), and what it does not use is kept here for RESERVATION_MS. Tokens are always taken
   * from the store before they are granted, so batching never admits more than the limit; it
   * can admit fewer (tokens reserved by one instance are not available to another, and expire
   * unused). docs/scaling.md has the measured trade-off.
   */
  private takeReserved(checks: LimitCheck[], nowMs: number): Map<number, LimitOutcome> | null {
    let reserved: Map<number, LimitOutcome> | null = null;
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      if (c.spec.algorithm !== "token_bucket" || c.spec.batch === undefined) continue;
      const r = this.reservations.get(c.key);
      if (r && r.expiresAtMs > nowMs && r.tokens >= c.cost) {
        r.tokens -= c.cost;
        reserved ??= new Map();
        reserved.set(i, {
          allowed: true,
          remaining: r.remaining + r.tokens,
          resetMs: Math.max(0, Math.ceil(r.resetAtMs - nowMs)),
          retryAfterMs: 0,
        });
      } else {
        c.batch = c.spec.batch;
      }
    }
    return reserved;
  }

  /** A refill in flight for a batched key this request cannot serve from its reservation. */
  private refillInFlight(checks: LimitCheck[], nowMs: number): Promise<void> | undefined {
    for (const c of checks) {
      if (c.spec.algorithm !== "token_bucket" || c.spec.batch === undefined) continue;
      const r = this.reservations.get(c.key);
      if (r && r.expiresAtMs > nowMs && r.tokens >= c.cost) continue;
      const inFlight = this.refills.get(c.key);
      if (inFlight) return inFlight;
    }
    return undefined;
  }

  /** Marks the batched keys this request refills; the returned function ends the refill. */
  private startRefills(checks: readonly LimitCheck[]): (() => void) | undefined {
    const keys = checks.filter((c) => c.batch !== undefined).map((c) => c.key);
    if (keys.length === 0) return undefined;
    let done!: () => void;
    const promise = new Promise<void>((resolve) => {
      done = resolve;
    });
    for (const key of keys) this.refills.set(key, promise);
    return () => {
      for (const key of keys) if (this.refills.get(key) === promise) this.refills.delete(key);
      done();
    };
  }

  /** The store's answer for the rest, with the reserved limits put back in their places. */
  private mergeReserved(
    checks: LimitCheck[],
    toStore: LimitCheck[],
    reserved: Map<number, LimitOutcome>,
    decision: StoreDecision,
  ): StoreDecision {
    if (!decision.allowed) this.giveBack(checks, reserved);
    else this.keepReserved(toStore, decision, Date.now());
    const outcomes: LimitOutcome[] = [];
    let j = 0;
    for (let i = 0; i < checks.length; i++) outcomes.push(reserved.get(i) ?? decision.outcomes[j++]!);
    return { allowed: decision.allowed, outcomes };
  }

  /** A denied request gives its reserved tokens back. */
  private giveBack(checks: LimitCheck[], reserved: Map<number, LimitOutcome>): void {
    for (const i of reserved.keys()) {
      const r = this.reservations.get(checks[i]!.key);
      if (r) r.tokens += checks[i]!.cost;
    }
  }

  /** Keeps what batched checks took beyond their own cost. */
  private keepReserved(checks: readonly LimitCheck[], decision: StoreDecision, nowMs: number): void {
    if (!decision.allowed) return;
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const taken = decision.outcomes[i]?.taken;
      if (c.batch === undefined || taken === undefined) continue;
      if (this.reservations.size >= RESERVATIONS_MAX) {
        const oldest = this.reservations.keys().next();
        if (!oldest.done) this.reservations.delete(oldest.value);
      }
      const o = decision.outcomes[i]!;
      // Unexpired tokens still held add to the new ones (a reload of the same key never loses them).
      const prior = this.reservations.get(c.key);
      const kept = prior && prior.expiresAtMs > nowMs ? prior.tokens : 0;
      this.reservations.delete(c.key);
      this.reservations.set(c.key, {
        tokens: kept + taken - c.cost,
        expiresAtMs: nowMs + RESERVATION_MS,
        remaining: o.remaining,
        resetAtMs: nowMs + o.resetMs,
      });
    }
  }

  /** A denial decided by the deny cache: answered now, recorded at the next flush. */
  private deniedLocally(
    caller: Caller,
    route: CompiledRoute,
    checks: LimitCheck[],
    local: LocalDenial,
    nowMs: number,
  ): LimitDecision {
    const violated = local.violated.map((v) => ({ spec: checks[v.index]!.spec, outcome: v.outcome }));
    const logKey = denialLogKey(this.prefix, caller);
    let batch = this.pending.get(logKey);
    if (!batch) {
      const topKey = topDenialsKey(this.prefix, nowMs);
      batch = { logKey, topKey, caller: callerLabel(caller), entries: [], count: 0 };
      this.pending.set(logKey, batch);
    }
    // The log keeps the last DENIAL_LOG_MAX; counts go to the top list in full.
    if (batch.entries.length >= DENIAL_LOG_MAX) batch.entries.shift();
    batch.entries.push({ atMs: nowMs, route: route.name, limits: violated.map((v) => v.spec.name) });
    batch.count = (batch.count ?? 0) + 1;
    return {
      kind: "denied",
      applied: violated,
      violated,
      retryAfterMs: Math.max(...violated.map((v) => v.outcome.retryAfterMs)),
      local: true,
    };
  }

  /**
   * Writes the denials the deny cache decided since the last flush (every second, and before
   * the admin API reads). A failed write is dropped: denial records are advisory.
   */
  async flushDenials(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    await this.store.recordDenials(batch).catch(() => {});
  }

  /** Forgets what the deny cache knows of these keys (an operator reset them). */
  forgetDenials(keys: Iterable<string>): void {
    this.denyCache?.forget(keys);
  }

  /** Stops the flush timer after a last flush (a reload replaced this limiter, or shutdown). */
  async close(): Promise<void> {
    clearInterval(this.flushTimer);
    await this.flushDenials();
  }

  /**
   * Where a denial of this request is written (by the same store call): the caller's log, under
   * its own hash tag, and the current five-minute bucket of the top list.
   */
  private denialRecord(
    caller: Caller,
    route: CompiledRoute,
    planned: readonly PlannedLimit[] | null,
    checks: LimitCheck[],
    nowMs: number,
  ): DenialRecord {
    // "<route>\t<limit names>" is the same for every request of a plan and route that applies
    // the same limits (with or without the tenant's): built once per planned list and count.
    let tails = planned ? recordTails.get(planned) : undefined;
    if (planned && !tails) {
      tails = new Map();
      recordTails.set(planned, tails);
    }
    let tail = tails?.get(checks.length);
    if (tail === undefined) {
      tail = route.name;
      for (const c of checks) tail += `\t${c.spec.name}`;
      tails?.set(checks.length, tail);
    }
    const bucket = Math.floor(nowMs / TOP_BUCKET_MS);
    if (bucket !== this.topBucket) {
      this.topBucket = bucket;
      this.topKey = topDenialsKey(this.prefix, nowMs);
    }
    return {
      logKey: denialLogKey(this.prefix, caller),
      topKey: this.topKey,
      text: `${callerLabel(caller)}\t${tail}`,
    };
  }

  /**
   * Debits `extraUnits` more from the limits a request was admitted under (the upstream's
   * Tollgate-Cost beyond the route's cost). Resolves either way: a failed debit is reported,
   * never turned into a failed response.
   */
  async postCharge(
    checks: readonly LimitCheck[],
    extraUnits: number,
  ): Promise<{ ok: true; charged: ChargedLimit[] } | { ok: false; reason: DegradedReason }> {
    try {
      const charged = await this.store.charge(
        // Spelled out: a spread plus a key the check may lack takes V8's slow path.
        checks.map((c) => ({ key: c.key, spec: c.spec, cost: extraUnits, leaseId: c.leaseId })),
      );
      return { ok: true, charged };
    } catch (err) {
      return { ok: false, reason: classifyStoreError(err) };
    }
  }
}

/** How the admin API names a caller: `client:<id>` or `ip:<addr>`. */
export function callerLabel(caller: Caller): string {
  return caller.kind === "client" ? `client:${caller.id}` : `ip:${caller.ipKey}`;
}

export function denialLogKey(prefix: string, caller: Caller): string {
  return `${prefix}${scopeKey("caller", caller)}denials`;
}

export function topDenialsKey(prefix: string, nowMs: number): string {
  return `${prefix}{denials}:top:${Math.floor(nowMs / TOP_BUCKET_MS) * TOP_BUCKET_MS}`;
}

/** The buckets that cover the last hour, newest first. */
export function lastHourTopKeys(prefix: string, nowMs: number): string[] {
  const keys: string[] = [];
  for (let i = 0; i < 3_600_000 / TOP_BUCKET_MS; i++)
    keys.push(topDenialsKey(prefix, nowMs - i * TOP_BUCKET_MS));
  return keys;
}

/** The lease a concurrency check took, or null for any other limit. */
export function leaseOf(c: LimitCheck): Lease | null {
  if (c.spec.algorithm !== "concurrency" || c.leaseId === undefined) return null;
  return { key: c.key, leaseId: c.leaseId, leaseMs: c.spec.leaseMs };
}

/** Leases are renewed this often while their request is in flight (a third of the lease). */
export function renewEveryMs(leases: readonly Lease[]): number {
  return Math.max(250, Math.min(...leases.map((l) => l.leaseMs)) / 3);
}

/**
 * Holds a request's leases: renews them while it runs (a long download, a WebSocket may outlive
 * `lease`) and gives them back once, whatever calls the returned release twice.
 */
export function holdLeases(store: Store, leases: Lease[]): () => Promise<void> {
  let released: Promise<void> | null = null;
  const renewal = setInterval(() => void store.renew(leases).catch(() => {}), renewEveryMs(leases));
  renewal.unref();
  return () => {
    clearInterval(renewal);
    released ??= store.release(leases);
    return released;
  };
}

/** The gateway's release: the same, reporting a failure instead of throwing it. */
function releaseOnce(store: Store, leases: Lease[]): () => Promise<StoreResult> {
  const release = holdLeases(store, leases);
  let result: Promise<StoreResult> | null = null;
  return () => {
    result ??= release().then(
      (): StoreResult => ({ ok: true }),
      (err: unknown): StoreResult => ({ ok: false, reason: classifyStoreError(err) }),
    );
    return result;
  };
}

/**
 * `checks` is the request's own array (built per request), kept for a post-charge, not copied.
 * `store` is the one that decided: leases go back to it.
 */
function toDecision(
  checks: LimitCheck[],
  decision: StoreDecision,
  store: Store,
  degraded?: DegradedReason,
): LimitDecision {
  const applied = checks.map((c, i) => ({ spec: c.spec, outcome: decision.outcomes[i]! }));
  if (decision.allowed) {
    let delayMs = 0;
    let leases: Lease[] | undefined;
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const delay = decision.outcomes[i]!.delayMs;
      if (delay !== undefined && delay > delayMs) delayMs = delay;
      const lease = leaseOf(c);
      if (!lease) continue;
      leases ??= [];
      leases.push(lease);
    }
    const allowed: Extract<LimitDecision, { kind: "allowed" }> = {
      kind: "allowed",
      applied,
      checks,
      delayMs,
    };
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
  return degraded
    ? { kind: "denied", applied, violated, retryAfterMs, degraded }
    : { kind: "denied", applied, violated, retryAfterMs };
}
