// Compiled limit specifications and the outcomes a store reports for them.
import { ALGORITHMS, type LimitSpec } from "./algorithms/index.js";
import type { Check, LimitOutcome } from "./spec-base.js";

export type {
  ConcurrencySpec,
  LeakyBucketSpec,
  LimitSpec,
  TokenBucketSpec,
  WindowSpec,
} from "./algorithms/index.js";
export { type BudgetUnit, type Check, isBudget, type LimitOutcome, type SpecBase } from "./spec-base.js";

/** One limit to decide for one request (spec-base.ts has its members). */
export type LimitCheck = Check<LimitSpec>;

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
