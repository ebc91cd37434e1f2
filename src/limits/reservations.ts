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
  /** Refills in flight per key; each resolves with whether it left a reservation. */
  private readonly refills = new Map<string, Promise<boolean>>();
  /**
   * Keys whose last refill the store denied for the batched limit itself, until it has a token
   * again (the denial's retry-after): until then they are checked unbatched, so requests go out
   * together (one script call per event-loop turn, or the deny cache) instead of one refill at a
   * time, each found empty in turn.
   */
  private readonly dryUntil = new Map<string, number>();
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
    // refill in flight instead of each taking a batch of their own. A refill that left no
    // reservation (the bucket was empty, or another limit of its request denied) releases its
    // waiters together, unbatched: waiting for another refill each would send them to the store
    // one at a time, every one woken once per waiter ahead of it.
    let unbatched = false;
    for (let refill = this.refillInFlight(checks, this.time(options)); refill; ) {
      if (!(await refill)) {
        unbatched = true;
        break;
      }
      refill = this.refillInFlight(checks, this.time(options));
    }
    const nowMs = this.time(options);
    const reserved = this.takeReserved(checks, nowMs, unbatched);
    const toStore = reserved ? checks.filter((_, i) => !reserved.has(i)) : checks;
    const refilled = this.startRefills(toStore);
    let decision: StoreDecision;
    try {
      decision =
        toStore.length === 0 ? { allowed: true, outcomes: [] } : await this.inner.check(toStore, options);
    } catch (err) {
      refilled?.(false);
      if (reserved) this.giveBack(checks, reserved);
      throw err;
    }
    if (!decision.allowed) {
      if (reserved) this.giveBack(checks, reserved);
      this.markDry(toStore, decision, nowMs);
    } else {
      this.keepReserved(toStore, decision, nowMs);
    }
    // Waiters wake to the reservation just kept, or, if none was, go out together.
    refilled?.(decision.allowed);
    return reserved ? merged(checks, reserved, decision) : decision;
  }

  private time(options: CheckOptions | undefined): number {
    return options?.nowMs ?? this.now();
  }

  /**
   * Serves what it can from reservations; marks the other batched checks to refill, unless the
   * request goes `unbatched` or the key is dry (checked as an ordinary token bucket).
   */
  private takeReserved(
    checks: readonly LimitCheck[],
    nowMs: number,
    unbatched: boolean,
  ): Map<number, LimitOutcome> | null {
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
      } else if (!unbatched && !this.isDry(c.key, nowMs)) {
        c.batch = c.spec.batch;
      }
    }
    return reserved;
  }

  /** A refill in flight for a batched key this request cannot serve from its reservation. */
  private refillInFlight(checks: readonly LimitCheck[], nowMs: number): Promise<boolean> | undefined {
    for (const c of checks) {
      if (c.spec.algorithm !== "token_bucket" || c.spec.batch === undefined) continue;
      const r = this.reservations.get(c.key);
      if (r && r.expiresAtMs > nowMs && r.tokens >= c.cost) continue;
      if (this.isDry(c.key, nowMs)) continue;
      const inFlight = this.refills.get(c.key);
      if (inFlight) return inFlight;
    }
    return undefined;
  }

  /**
   * Marks the batched keys this request refills; the returned function ends the refill, saying
   * whether it left a reservation.
   */
  private startRefills(checks: readonly LimitCheck[]): ((kept: boolean) => void) | undefined {
    const keys = checks.filter((c) => c.batch !== undefined).map((c) => c.key);
    if (keys.length === 0) return undefined;
    let done!: (kept: boolean) => void;
    const promise = new Promise<boolean>((resolve) => {
      done = resolve;
    });
    for (const key of keys) this.refills.set(key, promise);
    return (kept) => {
      for (const key of keys) if (this.refills.get(key) === promise) this.refills.delete(key);
      done(kept);
    };
  }

  private isDry(key: string, nowMs: number): boolean {
    const until = this.dryUntil.get(key);
    if (until === undefined) return false;
    if (until > nowMs) return true;
    this.dryUntil.delete(key);
    return false;
  }

  /** A refill the batched limit itself denied: its key is dry until the limit has a token again. */
  private markDry(checks: readonly LimitCheck[], decision: StoreDecision, nowMs: number): void {
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const o = decision.outcomes[i];
      if (c.batch === undefined || o === undefined || o.allowed) continue;
      if (this.dryUntil.size >= RESERVATIONS_MAX) {
        const oldest = this.dryUntil.keys().next();
        if (!oldest.done) this.dryUntil.delete(oldest.value);
      }
      this.dryUntil.set(c.key, nowMs + Math.max(1, o.retryAfterMs));
    }
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
  if (decision.local) return { allowed: decision.allowed, outcomes, local: true };
  return decision.decidedAt === undefined
    ? { allowed: decision.allowed, outcomes }
    : { allowed: decision.allowed, outcomes, decidedAt: decision.decidedAt };
}
