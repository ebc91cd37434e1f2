// What every limit spec and every check has, whatever its algorithm: the types the algorithms
// (algorithms/) are written against, apart from spec.ts, which dispatches to the algorithms.
// Nothing here imports an algorithm, so the algorithms and the specs never import each other.

/** What every spec has, whatever its algorithm (each algorithm's spec is in algorithms/). */
export interface SpecBase {
  /** `<plan>.<key>`: the name clients see in headers and 429 bodies. */
  name: string;
  /** Evaluated and counted, never denies (rolling out a new limit). */
  shadow?: boolean;
  /**
   * `tokens`: a token budget, charged the units the upstream reports (route `charge`, or an AI
   * route's usage); `usd`: a money budget, in integer micro-dollars, charged what an AI route's
   * usage costs at the price table. Absent: the limit counts requests (each takes the route's
   * cost).
   */
  unit?: BudgetUnit;
}

/** The units a budget counts: tokens, or micro-dollars (`usd`). */
export type BudgetUnit = "tokens" | "usd";

/**
 * Whether a limit is a budget (`unit: tokens` or `usd`): charged what a response reports, and
 * given back what an AI route reserved beyond it, so its state can loosen before its window
 * ends (the deny cache keeps such a denial briefly).
 */
export function isBudget(spec: SpecBase): boolean {
  return spec.unit !== undefined;
}

/** One limit to decide for one request: which state key, which spec, how much it takes. */
export interface Check<S> {
  key: string;
  spec: S;
  cost: number;
  /** Concurrency only: the lease this request holds, unique across instances. */
  leaseId?: string;
  /** A batched token bucket refilling its reservation: take up to this many, at least `cost`. */
  batch?: number;
  /**
   * A token budget under a route's `max_cost`: allowed only if this many units would be, though
   * it takes only `cost` (the rest is charged when the upstream reports it). Greater than cost.
   */
  need?: number;
}

/** What a store says about one limit of a request. */
export interface LimitOutcome {
  allowed: boolean;
  /** Whole units left after this request (when allowed) or available now (when denied). */
  remaining: number;
  /** Until the limit is back to full, in ms. */
  resetMs: number;
  /** When denied: until this request would fit, in ms. 0 when allowed. */
  retryAfterMs: number;
  /** Leaky bucket, when allowed: how long the request waits for its slot, in ms (absent: none). */
  delayMs?: number;
  /** A batched check, when allowed: the tokens taken (from `cost` up to the batch). */
  taken?: number;
}
