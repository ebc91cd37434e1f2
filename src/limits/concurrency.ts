// Concurrency limit: the leases of the requests a caller has in flight, each with the time it
// expires. A request takes a lease if fewer than `maxInFlight` are live and gives it back when
// it ends; a lease whose gateway died simply expires. lua/concurrency.lua is the same
// arithmetic on a sorted set (lease id scored by expiry).
import type { ConcurrencySpec, LimitOutcome } from "./spec.js";

/** Live leases: [lease id, expires at ms]. */
export type Leases = ReadonlyArray<readonly [string, number]>;

/**
 * A denied caller is told to come back in at most this long: a slot frees when any request of
 * theirs ends, which is usually far sooner than the lease, and nothing predicts when.
 */
export const CONCURRENCY_RETRY_CAP_MS = 1000;

export interface ConcurrencyStep {
  outcome: LimitOutcome;
  uncharged: LimitOutcome;
  next: Leases;
  ttlMs: number;
}

export function concurrencyStep(
  state: Leases | null,
  nowMs: number,
  spec: ConcurrencySpec,
  leaseId: string,
): ConcurrencyStep {
  const live = (state ?? []).filter(([, expiresAt]) => expiresAt > nowMs);
  const used = live.length;
  let earliestMs = 0;
  let latestMs = 0;
  if (used > 0) {
    let first = Number.POSITIVE_INFINITY;
    let last = Number.NEGATIVE_INFINITY;
    for (const [, expiresAt] of live) {
      if (expiresAt < first) first = expiresAt;
      if (expiresAt > last) last = expiresAt;
    }
    earliestMs = Math.ceil(first - nowMs);
    latestMs = Math.ceil(last - nowMs);
  }
  const available = Math.max(0, spec.maxInFlight - used);
  const uncharged = { allowed: true, remaining: available, resetMs: latestMs, retryAfterMs: 0 };
  if (used + 1 > spec.maxInFlight) {
    const outcome = {
      allowed: false,
      remaining: available,
      resetMs: latestMs,
      retryAfterMs: Math.max(1, Math.min(CONCURRENCY_RETRY_CAP_MS, earliestMs)),
    };
    return { outcome, uncharged: outcome, next: live, ttlMs: latestMs + 1000 };
  }
  const fullMs = Math.max(Math.ceil(spec.leaseMs), latestMs);
  return {
    outcome: { allowed: true, remaining: spec.maxInFlight - used - 1, resetMs: fullMs, retryAfterMs: 0 },
    uncharged,
    next: [...live, [leaseId, nowMs + spec.leaseMs]],
    ttlMs: fullMs + 1000,
  };
}

/** The leases left once `leaseId` is given back. */
export function releaseLease(state: Leases | null, leaseId: string): Leases {
  return (state ?? []).filter(([id]) => id !== leaseId);
}

/**
 * The leases with `leaseId` extended to `leaseMs` from now, if it is still live; the same array
 * when there is nothing to extend (released or expired leases are not brought back).
 */
export function renewLease(state: Leases, leaseId: string, nowMs: number, leaseMs: number): Leases {
  const at = state.findIndex(([id, expiresAt]) => id === leaseId && expiresAt > nowMs);
  if (at === -1) return state;
  const next = [...state];
  next[at] = [leaseId, nowMs + leaseMs];
  return next;
}
