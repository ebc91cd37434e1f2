// The circuit breaker around the shared store (opossum). When too many checks fail, the store
// is not asked at all for `cooldown`: every request gets the failure policy at once instead of
// waiting out a timeout. Then one probe is let through (half-open); its success closes the
// breaker. A denial is a decision, not a failure, so it never counts against the store.
import CircuitBreaker from "opossum";
import type { LimitCheck, StoreDecision } from "./spec.js";
import type { ChargedLimit, Denial, DenialBatch, DenialRecord, Lease, Store } from "./store.js";

export interface BreakerOptions {
  /** Share of failed checks (0..1) within `windowMs` that opens the breaker. */
  errorRate: number;
  /** Checks within the window before the rate is trusted. */
  minRequests: number;
  windowMs: number;
  /** How long the breaker stays open before a probe. */
  cooldownMs: number;
}

export const DEFAULT_BREAKER: BreakerOptions = {
  errorRate: 0.5,
  minRequests: 20,
  windowMs: 10_000,
  cooldownMs: 5000,
};

/** 0 closed, 1 half-open, 2 open: the values of tollgate_breaker_state. */
export type BreakerState = 0 | 1 | 2;

export class BreakerOpenError extends Error {
  constructor() {
    super("the limit store's circuit breaker is open");
    this.name = "BreakerOpenError";
  }
}

export class BreakerStore implements Store {
  readonly kind: Store["kind"];
  private readonly breaker: CircuitBreaker<
    [readonly LimitCheck[], number | undefined, DenialRecord | undefined],
    StoreDecision
  >;
  private stateValue: BreakerState = 0;

  constructor(
    private readonly inner: Store,
    options: BreakerOptions,
    onState: (state: BreakerState) => void = () => {},
  ) {
    this.kind = inner.kind;
    this.breaker = new CircuitBreaker(
      (checks: readonly LimitCheck[], nowMs: number | undefined, record: DenialRecord | undefined) =>
        inner.check(checks, nowMs, record),
      {
        // The store bounds every check itself (store.timeout); a second timer here would only
        // race it.
        timeout: false,
        errorThresholdPercentage: options.errorRate * 100,
        volumeThreshold: options.minRequests,
        rollingCountTimeout: options.windowMs,
        rollingCountBuckets: 10,
        resetTimeout: options.cooldownMs,
        // Latency percentiles and snapshot events are not used: with them opossum keeps every
        // latency of the window and sorts them each second, a cost paid per request.
        rollingPercentilesEnabled: false,
        enableSnapshots: false,
      },
    );
    const set = (state: BreakerState) => {
      this.stateValue = state;
      onState(state);
    };
    this.breaker.on("open", () => set(2));
    this.breaker.on("halfOpen", () => set(1));
    this.breaker.on("close", () => set(0));
  }

  get state(): BreakerState {
    return this.stateValue;
  }

  check(checks: readonly LimitCheck[], nowMs?: number, record?: DenialRecord): Promise<StoreDecision> {
    return this.breaker.fire(checks, nowMs, record).catch((err: unknown) => {
      throw (err as { code?: string }).code === "EOPENBREAKER" ? new BreakerOpenError() : err;
    });
  }

  /** A post-charge is bookkeeping after the fact: not counted by the breaker, but refused while it is open. */
  charge(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]> {
    if (this.stateValue === 2) return Promise.reject(new BreakerOpenError());
    return this.inner.charge(checks, nowMs);
  }

  /**
   * Releases are tried even while the breaker is open: the lease was taken from this store, and
   * a failed release costs only the wait for the lease to expire.
   */
  release(leases: readonly Lease[]): Promise<void> {
    return this.inner.release(leases);
  }

  renew(leases: readonly Lease[], nowMs?: number): Promise<void> {
    return this.inner.renew(leases, nowMs);
  }

  // The admin API's reads and resets go straight to the store: an operator asking is not
  // traffic, and should see the store's own error rather than the breaker's.
  peek(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]> {
    return this.inner.peek(checks, nowMs);
  }

  denials(logKey: string): Promise<Denial[]> {
    return this.inner.denials(logKey);
  }

  topDenials(topKeys: readonly string[], n: number): Promise<{ caller: string; count: number }[]> {
    return this.inner.topDenials(topKeys, n);
  }

  reset(keys: readonly string[]): Promise<number> {
    return this.inner.reset(keys);
  }

  /** Bookkeeping like a post-charge: refused while the breaker is open (it is retried later). */
  recordDenials(batch: readonly DenialBatch[]): Promise<void> {
    if (this.stateValue === 2) return Promise.reject(new BreakerOpenError());
    return this.inner.recordDenials(batch);
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  isConnected(): boolean {
    return this.inner.isConnected();
  }

  waitUntilReady(timeoutMs: number): Promise<boolean> {
    return this.inner.waitUntilReady(timeoutMs);
  }

  async close(): Promise<void> {
    this.breaker.shutdown();
    await this.inner.close();
  }
}
