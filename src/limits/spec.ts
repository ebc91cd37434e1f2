// Compiled limit specifications and the outcomes a store reports for them.

/** Token bucket: `burst` tokens, one token back every `intervalMs`. */
export interface TokenBucketSpec {
  algorithm: "token_bucket";
  /** `<plan>.<key>`: the name clients see in headers and 429 bodies. */
  name: string;
  burst: number;
  intervalMs: number;
}

/**
 * Window algorithms: at most `limit` units per `windowMs`. `fixed_window` counts per aligned
 * window (cheap, allows up to 2 × limit across a boundary); `sliding_window` keeps an exact log
 * of the window (exact, memory grows with the limit: for small limits such as logins);
 * `sliding_window_counter` weighs two fixed windows (O(1) memory, approximate: large limits).
 */
export interface WindowSpec {
  algorithm: "fixed_window" | "sliding_window" | "sliding_window_counter";
  name: string;
  limit: number;
  windowMs: number;
}

/** Every rate algorithm a store can decide. Later algorithms join this union. */
export type LimitSpec = TokenBucketSpec | WindowSpec;

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

/** How long the limit takes to come back in full, in ms: a token bucket's refill, or the window. */
export function windowMs(spec: LimitSpec): number {
  return spec.algorithm === "token_bucket" ? spec.burst * spec.intervalMs : spec.windowMs;
}

/** Window clients are told about (RateLimit-Policy w=), in whole seconds. */
export function windowSeconds(spec: LimitSpec): number {
  return Math.max(1, Math.ceil(windowMs(spec) / 1000));
}

/** The most one caller can have at once: a bucket's burst, a window's limit. */
export function quota(spec: LimitSpec): number {
  return spec.algorithm === "token_bucket" ? spec.burst : spec.limit;
}
