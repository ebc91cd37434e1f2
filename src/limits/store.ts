// The one interface both stores implement. Only server.ts chooses the implementation.
import type { LimitCheck, StoreDecision } from "./spec.js";

/** A concurrency slot a request holds: the limit's key and the request's lease id. */
export interface Lease {
  key: string;
  leaseId: string;
}

/** A limit's state after a post-charge, for the response's headers. */
export interface ChargedLimit {
  remaining: number;
  resetMs: number;
}

export interface Store {
  readonly kind: "memory" | "redis";
  /**
   * Decides every limit of one request atomically, in one round trip. `nowMs` overrides the
   * store's clock (tests only). Rejects when the store cannot answer; a denial is a decision,
   * never a rejection.
   */
  check(checks: readonly LimitCheck[], nowMs?: number): Promise<StoreDecision>;
  /**
   * Debits `cost` units from every limit whatever is left (post-charge); a limit may go into
   * debt. Rejects when the store cannot answer.
   */
  charge(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]>;
  /**
   * Gives back concurrency leases taken by `check` (a request ended). Rejects when the store
   * cannot answer; the lease then expires on its own.
   */
  release(leases: readonly Lease[]): Promise<void>;
  /** Resolves when the store answers; readiness uses it. */
  ping(): Promise<void>;
  /** Whether the store is believed reachable right now, without a round trip. */
  isConnected(): boolean;
  /** Resolves true once the store can answer, false after `timeoutMs`; never rejects. */
  waitUntilReady(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}
