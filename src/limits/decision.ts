// What the limiter answers for one request: the contract between limits/ and proxy/.
import type { StoreUnavailableReason } from "../errors.js";
import type { LimitFacts } from "./plan.js";
import type { DecidedAt, LimitCheck, LimitOutcome, LimitSpec } from "./spec.js";

/** Why the store gave no decision: the labels of tollgate_store_errors_total. */
export type DegradedReason = StoreUnavailableReason;

/** One limit of a request and what the store said about it. */
export interface AppliedLimit {
  /**
   * What decided, as compiled: the limit, or its local share when the in-process fallback decided
   * (on_failure: local). Its description, quota and window are what the response says.
   */
  limit: LimitFacts;
  /** `limit.spec`. */
  spec: LimitSpec;
  outcome: LimitOutcome;
  /** The store key it was checked under (what names one caller's budget); absent in hand-made decisions. */
  key?: string;
}

/** Whether a store call landed; a failed release or post-charge is reported, never thrown. */
export type StoreResult = { ok: true } | { ok: false; reason: DegradedReason };

export interface AllowedDecision {
  kind: "allowed";
  applied: AppliedLimit[];
  /** The request's checks, kept for a post-charge. */
  checks: LimitCheck[];
  /** How long a leaky bucket makes the request wait for its slot. */
  delayMs: number;
  /** Shadow limits that would have denied this request (it was let through). */
  shadowLimited?: AppliedLimit[];
  /** Present when the request holds concurrency leases: call it once when the request ends. */
  release?: () => Promise<StoreResult>;
  /** Set when the in-process fallback decided (on_failure: local). */
  degraded?: DegradedReason;
  /** When the store decided: a settlement gives back into the window each check took from. */
  decidedAt?: DecidedAt;
  /**
   * An AI request's output ceiling per choice its budgets hold: its own, or lower when clamped
   * to what they could hold (ai.clamp). Absent: no reservation was taken.
   */
  output?: number;
}

export interface DeniedDecision {
  kind: "denied";
  applied: AppliedLimit[];
  violated: AppliedLimit[];
  retryAfterMs: number;
  degraded?: DegradedReason;
  /** Decided by the deny cache, without asking the store. */
  local?: true;
}

export type LimitDecision =
  | { kind: "unlimited" }
  | AllowedDecision
  | DeniedDecision
  | { kind: "degraded"; reason: DegradedReason; policy: "open" | "closed"; error: Error };
