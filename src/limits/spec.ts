// Compiled limit specifications and the outcomes a store reports for them.

interface SpecBase {
  /** `<plan>.<key>`: the name clients see in headers and 429 bodies. */
  name: string;
  /** Evaluated and counted, never denies (rolling out a new limit). */
  shadow?: boolean;
}

/** Token bucket: `burst` tokens, one token back every `intervalMs`. */
export interface TokenBucketSpec extends SpecBase {
  algorithm: "token_bucket";
  /** Tokens an instance reserves at a time (`batch: N`); absent: every request asks the store. */
  batch?: number;
  burst: number;
  intervalMs: number;
}

/**
 * Window algorithms: at most `limit` units per `windowMs`. `fixed_window` counts per aligned
 * window (cheap, allows up to 2 × limit across a boundary); `sliding_window` keeps an exact log
 * of the window (exact, memory grows with the limit: for small limits such as logins);
 * `sliding_window_counter` weighs two fixed windows (O(1) memory, approximate: large limits).
 */
export interface WindowSpec extends SpecBase {
  algorithm: "fixed_window" | "sliding_window" | "sliding_window_counter";
  limit: number;
  windowMs: number;
}

/**
 * Leaky bucket as a queue: requests leave at one per `intervalMs`; up to `queue` of them may wait
 * their turn, one more is served now. The store gives each admitted request its slot (a delay);
 * the gateway holds the request until then instead of rejecting it. A GCRA whose tolerance is
 * `queue + 1` intervals: the arithmetic of the token bucket, read as a delay.
 */
export interface LeakyBucketSpec extends SpecBase {
  algorithm: "leaky_bucket";
  queue: number;
  intervalMs: number;
}

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

/** Every algorithm a store can decide. */
export type LimitSpec = TokenBucketSpec | WindowSpec | LeakyBucketSpec | ConcurrencySpec;

/** One limit to decide for one request: which state key, which spec, how much it takes. */
export interface LimitCheck {
  key: string;
  spec: LimitSpec;
  cost: number;
  /** Concurrency only: the lease this request holds, unique across instances. */
  leaseId?: string;
  /** A batched token bucket refilling its reservation: take up to this many, at least `cost`. */
  batch?: number;
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

/** All limits of a request, decided together: `allowed` only if every limit allowed it. */
export interface StoreDecision {
  allowed: boolean;
  outcomes: LimitOutcome[];
}

/**
 * How long the limit takes to come back in full, in ms: a bucket's refill or drain, a window, or
 * a concurrency lease.
 */
export function windowMs(spec: LimitSpec): number {
  switch (spec.algorithm) {
    case "token_bucket":
      return spec.burst * spec.intervalMs;
    case "leaky_bucket":
      return (spec.queue + 1) * spec.intervalMs;
    case "concurrency":
      return spec.leaseMs;
    default:
      return spec.windowMs;
  }
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
  switch (spec.algorithm) {
    case "token_bucket":
      return spec.burst;
    case "leaky_bucket":
      return spec.queue + 1;
    case "concurrency":
      return spec.maxInFlight;
    default:
      return spec.limit;
  }
}
