// Concurrency limit: the leases of the requests a caller has in flight, each with the time it
// expires. A request takes a lease if fewer than `maxInFlight` are live and gives it back when
// it ends; a lease whose gateway died simply expires. lua/concurrency.lua is the same
// arithmetic on a sorted set (lease id scored by expiry). The registry entry (code 6) at the end
// carries the rest.
import { z } from "zod";
import { duration } from "../scalars.js";
import type { LimitOutcome, SpecBase } from "../spec-base.js";
import {
  type Algorithm,
  type DurationString,
  type LimitCommon,
  STATE_TTL_SLACK_MS,
  shareOf,
} from "./algorithm.js";

/**
 * At most `maxInFlight` requests of a caller in flight at once, across instances. Each admitted
 * request holds a lease until it ends (released) or until `leaseMs` passes (a dead gateway).
 * Route cost does not apply: one request holds one slot.
 */
export interface ConcurrencySpec extends SpecBase {
  algorithm: "concurrency";
  maxInFlight: number;
  leaseMs: number;
}

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
    return { outcome, uncharged: outcome, next: live, ttlMs: latestMs + STATE_TTL_SLACK_MS };
  }
  const fullMs = Math.max(Math.ceil(spec.leaseMs), latestMs);
  return {
    outcome: { allowed: true, remaining: spec.maxInFlight - used - 1, resetMs: fullMs, retryAfterMs: 0 },
    uncharged,
    next: [...live, [leaseId, nowMs + spec.leaseMs]],
    ttlMs: fullMs + STATE_TTL_SLACK_MS,
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

/**
 * At most `max_in_flight` at once per key, across every process sharing the store. An allowed
 * decision holds a slot until its `release()` (or until `lease` passes without renewal).
 */
export interface ConcurrencyLimit extends LimitCommon {
  algorithm: "concurrency";
  /** Slots per key (at least 1). */
  max_in_flight: number;
  /** How long a slot outlives a process that died holding it (default `"60s"`). */
  lease?: DurationString;
}

/** SPEC §2: a concurrency lease outlives a dead gateway by a minute unless configured. */
export const DEFAULT_LEASE_MS = 60_000;

const CONCURRENCY_KEYS = {
  max_in_flight: {
    schema: z.number().int().min(1).optional().describe("concurrency: requests in flight at once"),
    example: "2",
  },
  lease: {
    schema: duration()
      .optional()
      .describe("concurrency: how long a slot outlives a dead gateway (default 60s)"),
    example: "60s",
    unit: "duration",
  },
} as const;

// No charge: a request holds one slot whatever it cost, so a post-charge leaves it as it is.
export const concurrency: Algorithm<ConcurrencySpec, typeof CONCURRENCY_KEYS> = {
  code: 6,
  luaFile: "concurrency.lua",
  scriptParams: (spec) => [spec.maxInFlight, spec.leaseMs],
  // The request's lease in place of the cost.
  scriptCost: (check) => check.leaseId ?? "",
  step(state, nowMs, spec, _cost, leaseId) {
    if (leaseId === undefined) throw new Error(`concurrency limit ${spec.name} checked without a lease id`);
    const r = concurrencyStep(state as Leases | null, nowMs, spec, leaseId);
    return { outcome: r.outcome, uncharged: r.uncharged, nextState: r.next, ttlMs: r.ttlMs };
  },
  quota: (spec) => spec.maxInFlight,
  windowMs: (spec) => spec.leaseMs,
  describe: (spec) => `"${spec.name}" allows ${spec.maxInFlight} requests in flight at once`,
  localShare: (spec, fraction) => ({ ...spec, maxInFlight: shareOf(spec.maxInFlight, fraction) }),
  config: {
    keys: CONCURRENCY_KEYS,
    needs: ["max_in_flight"],
    what: "a concurrency limit (it takes max_in_flight and lease)",
    takes: "`max_in_flight` and `lease`",
    check(limit, problem) {
      if (limit.max_in_flight === undefined) problem("max_in_flight is missing (e.g. max_in_flight: 2)");
      if (limit.lease === 0) problem("lease must be longer than 0 (e.g. lease: 60s)", "lease");
    },
    compile: (name, limit) => ({
      algorithm: "concurrency",
      name,
      maxInFlight: limit.max_in_flight!,
      leaseMs: limit.lease ?? DEFAULT_LEASE_MS,
    }),
  },
};
