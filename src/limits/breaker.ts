// The circuit breaker around the shared store (opossum). When too many checks fail, the store
// is not asked at all for `cooldown`: every request gets the failure policy at once instead of
// waiting out a timeout. Then one probe is let through (half-open); its success closes the
// breaker. A denial is a decision, not a failure, so it never counts against the store.
// In a Redis Cluster each master has a breaker of its own: a lost shard opens its breaker
// only, and the callers of the other shards keep their exact limits.
import CircuitBreaker from "opossum";
import { BreakerOpenError } from "../errors.js";
import type { LimitCheck, StoreDecision } from "./spec.js";
import type {
  AtOptions,
  ChargedLimit,
  CheckOptions,
  Denial,
  DenialBatch,
  GiveBack,
  KeyListing,
  Lease,
  ListKeysBounds,
  Store,
} from "./stores/contract.js";

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

/** A transition of one shard's breaker ("" on a single store), and the state it leaves overall. */
export interface BreakerChange {
  shard: string;
  state: BreakerState;
  /** The worst state over all shards: what tollgate_breaker_state reports. */
  overall: BreakerState;
}

type StoreBreaker = CircuitBreaker<[readonly LimitCheck[], CheckOptions | undefined], StoreDecision>;

interface Shard {
  breaker: StoreBreaker;
  state: BreakerState;
}

/**
 * Breakers of shards no longer seen (a failover or resharding renamed the master) are dropped,
 * closed ones first, once there are this many.
 */
const MAX_SHARDS = 64;

export class BreakerStore implements Store {
  readonly kind: Store["kind"];
  /** One breaker per shard of the store (one in all on a single Redis). */
  private readonly shards = new Map<string, Shard>();
  private overall: BreakerState = 0;

  constructor(
    private readonly inner: Store,
    private readonly options: BreakerOptions,
    private readonly onChange: (change: BreakerChange) => void = () => {},
  ) {
    this.kind = inner.kind;
  }

  private shard(name: string): Shard {
    const existing = this.shards.get(name);
    if (existing) return existing;
    if (this.shards.size >= MAX_SHARDS) this.forgetOneShard();
    const { inner, options } = this;
    const breaker: StoreBreaker = new CircuitBreaker(
      (checks: readonly LimitCheck[], checkOptions: CheckOptions | undefined) =>
        inner.check(checks, checkOptions),
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
    const shard: Shard = { breaker, state: 0 };
    const set = (state: BreakerState) => {
      shard.state = state;
      this.onChange({ shard: name, state, overall: this.recompute() });
    };
    breaker.on("open", () => set(2));
    breaker.on("halfOpen", () => set(1));
    breaker.on("close", () => set(0));
    this.shards.set(name, shard);
    return shard;
  }

  /** Each shard's breaker and its state ("" for a single store), for the admin API's health. */
  breakers(): { shard: string; state: BreakerState }[] {
    return [...this.shards].map(([shard, s]) => ({ shard, state: s.state }));
  }

  /**
   * Drops the breaker of a shard that no longer serves (a Sentinel failover named a new master):
   * its checks go to a new shard with a closed breaker of its own, so a gateway whose breaker
   * opened on the dead master asks the new one at once instead of waiting out the cooldown; and
   * the old one's open state no longer holds tollgate_breaker_state up.
   */
  forget(name: string): void {
    const shard = this.shards.get(name);
    if (!shard) return;
    shard.breaker.shutdown();
    this.shards.delete(name);
    if (shard.state !== 0) this.onChange({ shard: name, state: 0, overall: this.recompute() });
  }

  private forgetOneShard(): void {
    let victim: string | undefined;
    for (const [name, s] of this.shards) {
      if (s.state === 0) {
        victim = name;
        break;
      }
      victim ??= name;
    }
    if (victim !== undefined) this.forget(victim);
  }

  private recompute(): BreakerState {
    let overall: BreakerState = 0;
    for (const s of this.shards.values()) if (s.state > overall) overall = s.state;
    this.overall = overall;
    return overall;
  }

  /** The worst state over all shards (0 while none has failed). */
  get state(): BreakerState {
    return this.overall;
  }

  /** The state of the breaker that guards these checks. */
  stateFor(checks: readonly LimitCheck[]): BreakerState {
    return this.shards.get(this.shardOf(checks))?.state ?? 0;
  }

  shardOf(checks: readonly LimitCheck[]): string {
    return this.inner.shardOf?.(checks) ?? "";
  }

  check(checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> {
    const { breaker } = this.shard(this.shardOf(checks));
    return breaker.fire(checks, options).catch((err: unknown) => {
      throw (err as { code?: string }).code === "EOPENBREAKER" ? new BreakerOpenError() : err;
    });
  }

  /** A post-charge is bookkeeping after the fact: not counted by the breaker, but refused while it is open. */
  charge(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]> {
    if (this.stateFor(checks) === 2) return Promise.reject(new BreakerOpenError());
    return this.inner.charge(checks, options);
  }

  /**
   * Releases are tried even while the breaker is open: the lease was taken from this store, and
   * a failed release costs only the wait for the lease to expire.
   */
  release(leases: readonly Lease[]): Promise<void> {
    return this.inner.release(leases);
  }

  renew(leases: readonly Lease[], options?: AtOptions): Promise<void> {
    return this.inner.renew(leases, options);
  }

  /**
   * Give-backs are tried even while the breaker is open, as releases are: the units were taken
   * from this store, and one that fails only leaves the caller charged its whole reservation.
   */
  refund(giveBacks: readonly GiveBack[], options?: AtOptions): Promise<void> {
    return this.inner.refund(giveBacks, options);
  }

  // The admin API's reads and resets go straight to the store: an operator asking is not
  // traffic, and should see the store's own error rather than the breaker's.
  peek(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]> {
    return this.inner.peek(checks, options);
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

  /** A store that cannot list keys lists none, and says the listing is incomplete. */
  listKeys(prefixes: readonly string[], bounds: ListKeysBounds): Promise<KeyListing> {
    return this.inner.listKeys
      ? this.inner.listKeys(prefixes, bounds)
      : Promise.resolve({ keys: [], complete: false });
  }

  /**
   * Bookkeeping like a post-charge: refused while every breaker is open (the records of many
   * callers go out together, and they are advisory: a shard that fails drops its part).
   */
  recordDenials(batch: readonly DenialBatch[]): Promise<void> {
    if (this.shards.size > 0 && [...this.shards.values()].every((s) => s.state === 2))
      return Promise.reject(new BreakerOpenError());
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
    for (const s of this.shards.values()) s.breaker.shutdown();
    await this.inner.close();
  }
}
