// The base of the limit-store decorators (reservations, deny cache): everything a decorator does
// not change goes to the store it wraps, so each decorator only states the calls it decides.
import type { LimitCheck, StoreDecision } from "./spec.js";
import type {
  AtOptions,
  ChargedLimit,
  CheckOptions,
  GiveBack,
  Lease,
  LimitStore,
} from "./stores/contract.js";

export abstract class DecoratedStore<S extends LimitStore = LimitStore> implements LimitStore {
  readonly kind: LimitStore["kind"];

  constructor(protected readonly inner: S) {
    this.kind = inner.kind;
  }

  abstract check(checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision>;

  shardOf(checks: readonly LimitCheck[]): string {
    return this.inner.shardOf?.(checks) ?? "";
  }

  charge(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]> {
    return this.inner.charge(checks, options);
  }

  refund(giveBacks: readonly GiveBack[], options?: AtOptions): Promise<void> {
    return this.inner.refund(giveBacks, options);
  }

  release(leases: readonly Lease[]): Promise<void> {
    return this.inner.release(leases);
  }

  renew(leases: readonly Lease[], options?: AtOptions): Promise<void> {
    return this.inner.renew(leases, options);
  }
}
