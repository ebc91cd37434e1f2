// Compiled limit specifications and the outcomes a store reports for them.
import { ALGORITHMS, type LimitSpec } from "./algorithms/index.js";

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

export type {
  ConcurrencySpec,
  LeakyBucketSpec,
  LimitSpec,
  TokenBucketSpec,
  WindowSpec,
} from "./algorithms/index.js";

/** One limit to decide for one request: which state key, which spec, how much it takes. */
export interface LimitCheck {
  key: string;
  spec: LimitSpec;
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

/**
 * When the store decided, exactly as it used the time (Redis's clock as "%.17g" text, or a
 * number): a give-back (LimitStore.refund) finds the window a check took from by it. One value
 * for the whole request, or one per check when its parts were decided apart (Redis Cluster
 * slots).
 */
export type DecidedAt = string | number | readonly (string | number)[];

/** All limits of a request, decided together: `allowed` only if every limit allowed it. */
export interface StoreDecision {
  allowed: boolean;
  outcomes: LimitOutcome[];
  /** Decided in this process by a decorator (the deny cache), without asking the store. */
  local?: true;
  /** When the store decided (absent: a decorator decided, or a store that does not say). */
  decidedAt?: DecidedAt;
}

/** When the store decided check `i` of a decision (see DecidedAt). */
export function decidedAtOf(at: DecidedAt | undefined, i: number): string | number | undefined {
  if (at === undefined || typeof at === "string" || typeof at === "number") return at;
  return at[i];
}

// What answering about a limit needs, asked of its algorithm (algorithms/): computed once per
// limit when it is compiled (compiled.ts), never at request time.

/**
 * How long the limit takes to come back in full, in ms: a bucket's refill or drain, a window, or
 * a concurrency lease.
 */
export function windowMs(spec: LimitSpec): number {
  return ALGORITHMS[spec.algorithm].windowMs(spec);
}

/** Window clients are told about (RateLimit-Policy w=), in whole seconds. */
export function windowSeconds(spec: LimitSpec): number {
  return Math.max(1, Math.ceil(windowMs(spec) / 1000));
}

/**
 * The most one caller can have at once: a bucket's burst, a window's limit, a leaky bucket's
 * queue plus the request being served, the requests in flight.
 */
export function quota(spec: LimitSpec): number {
  return ALGORITHMS[spec.algorithm].quota(spec);
}

/** How a 429 describes a limit. */
export function describeSpec(spec: LimitSpec): string {
  return ALGORITHMS[spec.algorithm].describe(spec);
}

/**
 * The limit one instance enforces alone while the store is away: `fraction` of the burst
 * (at least 1) refilled at `fraction` of the rate, or `fraction` of a window's limit.
 */
export function localSpec(spec: LimitSpec, fraction: number): LimitSpec {
  return ALGORITHMS[spec.algorithm].localShare(spec, fraction);
}
