// Compiled limit specifications and the outcomes a store reports for them.

/** Token bucket: `burst` tokens, one token back every `intervalMs`. */
export interface TokenBucketSpec {
  algorithm: "token_bucket";
  /** `<plan>.<key>`: the name clients see in headers and 429 bodies. */
  name: string;
  burst: number;
  intervalMs: number;
}

/** Every rate algorithm a store can decide. Later algorithms join this union. */
export type LimitSpec = TokenBucketSpec;

/** One limit to decide for one request: which state key, which spec, how much it takes. */
export interface LimitCheck {
  key: string;
  spec: LimitSpec;
  cost: number;
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
}

/** All limits of a request, decided together: `allowed` only if every limit allowed it. */
export interface StoreDecision {
  allowed: boolean;
  outcomes: LimitOutcome[];
}

/** Window clients are told about: how long a full bucket takes to refill, in seconds. */
export function windowSeconds(spec: LimitSpec): number {
  return Math.max(1, Math.ceil((spec.burst * spec.intervalMs) / 1000));
}

export function quota(spec: LimitSpec): number {
  return spec.burst;
}
