// The algorithm registry: one entry per algorithm, each carrying everything about it (its Lua
// code and file, script params, in-process step, forced debit, 429 wording, quota, window,
// local share, and its YAML keys, checks and compilation). The stores, the config pipeline and
// the scripts ask the entry of a spec's algorithm instead of switching on its name.
//
// Adding one: its file here (spec, arithmetic, entry), its lua/ file registering the same code,
// and a line in ENTRIES and in the unions below. test/unit/algorithm-registry.test.ts and
// test/unit/twin-constants.test.ts then hold it to the rest.
import type { Check } from "../spec-base.js";
import type { Algorithm, AlgorithmStep, LimitKeys } from "./algorithm.js";
import { type ConcurrencyLimit, type ConcurrencySpec, concurrency } from "./concurrency.js";
import { type LeakyBucketLimit, type LeakyBucketSpec, leakyBucket } from "./leaky-bucket.js";
import {
  type TokenBucketLimit,
  type TokenBucketQuotaLimit,
  type TokenBucketSpec,
  tokenBucket,
} from "./token-bucket.js";
import {
  fixedWindow,
  slidingWindow,
  slidingWindowCounter,
  type WindowLimit,
  type WindowSpec,
} from "./windows.js";

export type { Algorithm, AlgorithmStep } from "./algorithm.js";
export type {
  ConcurrencyLimit,
  ConcurrencySpec,
  LeakyBucketLimit,
  LeakyBucketSpec,
  TokenBucketLimit,
  TokenBucketQuotaLimit,
  TokenBucketSpec,
  WindowLimit,
  WindowSpec,
};

/** Every algorithm a store can decide. */
export type LimitSpec = TokenBucketSpec | WindowSpec | LeakyBucketSpec | ConcurrencySpec;

/** A limit as written to createLimiter, in the shapes of the YAML's limits, one per algorithm. */
export type AlgorithmLimitDefinition =
  | TokenBucketLimit
  | TokenBucketQuotaLimit
  | WindowLimit
  | LeakyBucketLimit
  | ConcurrencyLimit;

export type AlgorithmName = LimitSpec["algorithm"];

/** The spec of the algorithm named N (the windows share one spec type). */
type SpecNamed<N extends AlgorithmName> = LimitSpec extends infer S
  ? S extends LimitSpec
    ? N extends S["algorithm"]
      ? S
      : never
    : never
  : never;

/**
 * The entries by name. Their order is the order of the schema's `algorithm` enum and of the Lua
 * composition: an algorithm whose Lua file uses another's comes after it (leaky_bucket.lua reads
 * token_bucket.lua's GCRA).
 */
const ENTRIES = {
  token_bucket: tokenBucket,
  sliding_window: slidingWindow,
  sliding_window_counter: slidingWindowCounter,
  fixed_window: fixedWindow,
  leaky_bucket: leakyBucket,
  concurrency,
} as const satisfies { [N in AlgorithmName]: Algorithm<SpecNamed<N>, LimitKeys> };

/** What a limit without `algorithm` is. */
export const DEFAULT_ALGORITHM: AlgorithmName = "token_bucket";

/** Each entry seen through the spec it is looked up with: `ALGORITHMS[spec.algorithm].quota(spec)`. */
export const ALGORITHMS: Readonly<Record<AlgorithmName, Algorithm<LimitSpec>>> = ENTRIES;

export const ALGORITHM_NAMES = Object.keys(ENTRIES) as [AlgorithmName, ...AlgorithmName[]];

type Entry = (typeof ENTRIES)[AlgorithmName];
type KeysOf<A> = A extends { readonly config: { readonly keys: infer K } } ? K : never;
type Intersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;
/** Every key some algorithm takes, each with its definition. */
export type AlgorithmKeys = Intersection<KeysOf<Entry>>;

/**
 * Every key some algorithm takes, in registry order (a key several take appears once: it is the
 * same definition, from algorithm.ts). The schema's limit object is these and the common keys.
 */
export const ALGORITHM_KEYS = Object.assign(
  {},
  ...Object.values(ENTRIES).map((a) => a.config.keys),
) as AlgorithmKeys;

/** A rate limit is debited by cost (and so by a post-charge); the others hold a slot (a lease). */
export type RateLimitSpec = Exclude<LimitSpec, ConcurrencySpec>;

/** Whether a limit is debited by cost (rate limits) or holds a slot (concurrency). */
export function isRateLimit(spec: LimitSpec): spec is RateLimitSpec {
  return ALGORITHMS[spec.algorithm].charge !== undefined;
}

/** The fourth script argument of a limit: the cost, or what its algorithm reads in its place. */
export function scriptCostArg(check: Check<LimitSpec>): string | number {
  return ALGORITHMS[check.spec.algorithm].scriptCost(check);
}

/**
 * A forced debit (post-charge): the algorithm's own step with an unbounded quota always admits,
 * so its next state is the debit, even past the limit (debt). The Lua side does the same.
 */
export function chargeStep(state: unknown, nowMs: number, spec: RateLimitSpec, units: number): AlgorithmStep {
  const charge = ALGORITHMS[spec.algorithm].charge;
  if (!charge) throw new Error(`limit ${spec.name} is not debited by cost: it cannot be charged`);
  return charge(state, nowMs, spec, units);
}
