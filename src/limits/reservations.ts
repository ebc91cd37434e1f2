// `batch: N` token buckets, as a decorator in front of a store: a request takes its tokens from
// this instance's reservation when it holds enough; otherwise its check asks the store for up to
// N at once (at least its cost), and what it does not use is kept here for RESERVATION_MS. Tokens
// are always taken from the store before they are granted, so batching never admits more than the
// limit; it can admit fewer (tokens reserved by one instance are not available to another, and
// expire unused). docs/scaling.md has the measured trade-off.
import { DecoratedStore } from "./decorated-store.js";
import type { LimitCheck, LimitOutcome, StoreDecision } from "./spec.js";
import type { CheckOptions, LimitStore } from "./stores/contract.js";

/** How long an instance keeps tokens it reserved for a `batch: N` limit. */
export const RESERVATION_MS = 1000;
/** Most keys with a reservation at once; past it the oldest reservation is dropped (its tokens expire unused). */
export const RESERVATIONS_MAX = 100_000;

interface Reservation {
  tokens: number;
  expiresAtMs: number;
  /** The store's remaining and reset when the batch was taken, for the response headers. */
  remaining: number;
  resetAtMs: number;
}

function isBatched(c: LimitCheck): boolean {
  return c.spec.algorithm === "token_bucket" && c.spec.batch !== undefined;
}

export interface ReservationStoreOptions {
  /** This instance's clock: reservations expire by it. */
  now: () => number;
}

export class ReservationStore extends DecoratedStore {
  private readonly reservations = new Map<string, Reservation>();
  private readonly refills = new Map<string, Promise<void>>();
  private readonly now: () => number;

  constructor(inner: LimitStore, options: ReservationStoreOptions) {
    super(inner);
    this.now = options.now;
  }

  /** Keys holding a reservation (tests and bounds). */
  get size(): number {
    return this.reservations.size;
  }

  check(checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> {
    // Only `batch: N` limits concern reservations: other requests go straight through, with no
    // promise or array of their own.
    for (const c of checks) if (isBatched(c)) return this.checkBatched(checks, options);
    return this.inner.check(checks, options);
  }

  private async checkBatched(
    checks: readonly LimitCheck[],
    options: CheckOptions | undefined,
  ): Promise<StoreDecision> {
    // One refill per batched key at a time: requests that find the reservation short wait for the
    // refill in flight instead of each taking a batch of their own. A refill that found the bucket
    // empty leaves no reservation: the waiter then asks the store (or the deny cache behind this).
    for (let refill = this.refillInFlight(checks, this.time(options)); refill; ) {
      await refill;
      refill = this.refillInFlight(checks, this.time(options));
    }
    const nowMs = this.time(options);
    const reserved = this.takeReserved(checks, nowMs);
    const toStore = reserved ? checks.filter((_, i) => !reserved.has(i)) : checks;
    const refilled = this.startRefills(toStore);
    let decision: StoreDecision;
    try {
      decision =
        toStore.length === 0 ? { allowed: true, outcomes: [] } : await this.inner.check(toStore, options);
    } catch (err) {
      refilled?.();
      if (reserved) this.giveBack(checks, reserved);
      throw err;
    }
    if (!decision.allowed) {
      if (reserved) this.giveBack(checks, reserved);
    } else {
      this.keepReserved(toStore, decision, nowMs);
    }
    // Waiters wake to the reservation just kept.
    refilled?.();
    return reserved ? merged(checks, reserved, decision) : decision;
  }

  private time(options: CheckOptions | undefined): number {
    return options?.nowMs ?? this.now();
  }

  /** Serves what it can from reservations; marks the other batched checks to refill. */
  private takeReserved(checks: readonly LimitCheck[], nowMs: number): Map<number, LimitOutcome> | null {
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
  private refillInFlight(checks: readonly LimitCheck[], nowMs: number): Promise<void> | undefined {
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

  /** A request denied or failed gives its reserved tokens back. */
  private giveBack(checks: readonly LimitCheck[], reserved: Map<number, LimitOutcome>): void {
    for (const i of reserved.keys()) {
      const r = this.reservations.get(checks[i]!.key);
      if (r) r.tokens += checks[i]!.cost;
    }
  }

  /** Keeps what batched checks took beyond their own cost. */
  private keepReserved(checks: readonly LimitCheck[], decision: StoreDecision, nowMs: number): void {
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const o = decision.outcomes[i]!;
      if (c.batch === undefined || o.taken === undefined) continue;
      if (this.reservations.size >= RESERVATIONS_MAX) {
        const oldest = this.reservations.keys().next();
        if (!oldest.done) this.reservations.delete(oldest.value);
      }
      // Unexpired tokens still held add to the new ones (a reload of the same key never loses them).
      const prior = this.reservations.get(c.key);
      const kept = prior && prior.expiresAtMs > nowMs ? prior.tokens : 0;
      this.reservations.delete(c.key);
      this.reservations.set(c.key, {
        tokens: kept + o.taken - c.cost,
        expiresAtMs: nowMs + RESERVATION_MS,
        remaining: o.remaining,
        resetAtMs: nowMs + o.resetMs,
      });
    }
  }
}

/** The store's answer for the rest, with the reserved limits put back in their places. */
function merged(
  checks: readonly LimitCheck[],
  reserved: Map<number, LimitOutcome>,
  decision: StoreDecision,
): StoreDecision {
  const outcomes: LimitOutcome[] = [];
  let j = 0;
  for (let i = 0; i < checks.length; i++) outcomes.push(reserved.get(i) ?? decision.outcomes[j++]!);
  return decision.local
    ? { allowed: decision.allowed, outcomes, local: true }
    : { allowed: decision.allowed, outcomes };
}
