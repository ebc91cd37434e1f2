// Compiled limit specifications and the outcomes a store reports for them.
import { formatDuration } from "../config/units.js";

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
  /** Decided in this process by a decorator (the deny cache), without asking the store. */
  local?: true;
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

/** How a 429 describes a limit. */
export function describeSpec(spec: LimitSpec): string {
  const over = formatDuration(Math.round(windowMs(spec)));
  switch (spec.algorithm) {
    case "token_bucket":
      return `"${spec.name}" allows ${spec.burst} requests, refilled over ${over}`;
    case "leaky_bucket":
      return `"${spec.name}" serves one request every ${formatDuration(Math.round(spec.intervalMs))} and queues ${spec.queue}; the queue is full`;
    case "concurrency":
      return `"${spec.name}" allows ${spec.maxInFlight} requests in flight at once`;
    default:
      return `"${spec.name}" allows ${spec.limit} requests per ${over}`;
  }
}

/**
 * The limit one instance enforces alone while the store is away: `fraction` of the burst
 * (at least 1) refilled at `fraction` of the rate, or `fraction` of a window's limit.
 */
export function localSpec(spec: LimitSpec, fraction: number): LimitSpec {
  const share = (n: number) => Math.max(1, Math.floor(n * fraction));
  switch (spec.algorithm) {
    case "token_bucket":
      return { ...spec, burst: share(spec.burst), intervalMs: spec.intervalMs / fraction };
    case "leaky_bucket":
      // The queue may be 0 (serve one at a time, queue none): its share stays 0 then.
      return { ...spec, queue: Math.floor(spec.queue * fraction), intervalMs: spec.intervalMs / fraction };
    case "concurrency":
      return { ...spec, maxInFlight: share(spec.maxInFlight) };
    default:
      return { ...spec, limit: share(spec.limit) };
  }
}
