// The algorithm registry shared by both stores: how a spec becomes script arguments (Redis) and
// how one step of its arithmetic runs in-process (memory). New algorithms are added here once.
import { concurrencyStep, type Leases } from "./concurrency.js";
import { leakyBucketStep } from "./leaky-bucket.js";
import type {
  ConcurrencySpec,
  LeakyBucketSpec,
  LimitCheck,
  LimitOutcome,
  LimitSpec,
  TokenBucketSpec,
  WindowSpec,
} from "./spec.js";
import { tokenBucketBatchStep, tokenBucketStep, tokenBucketTtlMs } from "./token-bucket.js";
import {
  type CounterState,
  type FixedWindowState,
  fixedWindowStep,
  slidingCounterStep,
  slidingWindowStep,
  type WindowStep,
} from "./windows.js";

export interface AlgorithmStep {
  outcome: LimitOutcome;
  /** Reported instead of `outcome` when another limit of the request denies it. */
  uncharged: LimitOutcome;
  /** State to store if every limit of the request allows it (opaque to the store). */
  nextState: unknown;
  ttlMs: number;
}

export interface Algorithm {
  /** The code check.lua dispatches on. */
  code: number;
  scriptParams(spec: LimitSpec): [number, number];
  /**
   * `leaseId` is the request's lease, for a concurrency limit; `batch`, for a batched token
   * bucket refilling a reservation. The others ignore them.
   */
  step(
    state: unknown,
    nowMs: number,
    spec: LimitSpec,
    cost: number,
    leaseId?: string,
    batch?: number,
  ): AlgorithmStep;
}

/** The fourth script argument of a limit: the lease id for concurrency, the cost otherwise. */
export function scriptCostArg(check: LimitCheck): string | number {
  if (check.spec.algorithm === "concurrency") return check.leaseId ?? "";
  // A batched take: "<at least>:<up to>".
  return check.batch === undefined ? check.cost : `${check.cost}:${check.batch}`;
}

const tokenBucket: Algorithm = {
  code: 1,
  scriptParams: (spec) => {
    const s = spec as TokenBucketSpec;
    return [s.burst, s.intervalMs];
  },
  step(state, nowMs, spec, cost, _leaseId, batch) {
    if (batch !== undefined) {
      const r = tokenBucketBatchStep(state as number | null, nowMs, spec as TokenBucketSpec, cost, batch);
      // The step's outcome is this call's own: extended in place, not spread (V8's slow path).
      if (r.outcome.allowed) r.outcome.taken = r.taken;
      return {
        outcome: r.outcome,
        uncharged: r.uncharged,
        nextState: r.nextTat,
        ttlMs: tokenBucketTtlMs(r.nextTat, nowMs),
      };
    }
    const { outcome, uncharged, nextTat } = tokenBucketStep(
      state as number | null,
      nowMs,
      spec as TokenBucketSpec,
      cost,
    );
    return { outcome, uncharged, nextState: nextTat, ttlMs: tokenBucketTtlMs(nextTat, nowMs) };
  },
};

/** Window algorithms share their arguments (limit, window) and their step's shape. */
function windowAlgorithm<S>(
  code: number,
  step: (state: S | null, nowMs: number, spec: WindowSpec, cost: number) => WindowStep<S>,
): Algorithm {
  return {
    code,
    scriptParams: (spec) => {
      const s = spec as WindowSpec;
      return [s.limit, s.windowMs];
    },
    step(state, nowMs, spec, cost) {
      const r = step(state as S | null, nowMs, spec as WindowSpec, cost);
      return { outcome: r.outcome, uncharged: r.uncharged, nextState: r.next, ttlMs: r.ttlMs };
    },
  };
}

const leakyBucket: Algorithm = {
  code: 5,
  scriptParams: (spec) => {
    const s = spec as LeakyBucketSpec;
    return [s.queue + 1, s.intervalMs];
  },
  step(state, nowMs, spec, cost) {
    const { outcome, uncharged, nextTat } = leakyBucketStep(
      state as number | null,
      nowMs,
      spec as LeakyBucketSpec,
      cost,
    );
    return { outcome, uncharged, nextState: nextTat, ttlMs: tokenBucketTtlMs(nextTat, nowMs) };
  },
};

const concurrency: Algorithm = {
  code: 6,
  scriptParams: (spec) => {
    const s = spec as ConcurrencySpec;
    return [s.maxInFlight, s.leaseMs];
  },
  step(state, nowMs, spec, _cost, leaseId) {
    if (leaseId === undefined) throw new Error(`concurrency limit ${spec.name} checked without a lease id`);
    const r = concurrencyStep(state as Leases | null, nowMs, spec as ConcurrencySpec, leaseId);
    return { outcome: r.outcome, uncharged: r.uncharged, nextState: r.next, ttlMs: r.ttlMs };
  },
};

/**
 * A forced debit (post-charge): the algorithm's own step with an unbounded quota always admits,
 * so its next state is the debit, even past the limit (debt). The Lua side does the same.
 */
export function chargeStep(
  state: unknown,
  nowMs: number,
  spec: Exclude<LimitSpec, ConcurrencySpec>,
  units: number,
): AlgorithmStep {
  if (spec.algorithm === "sliding_window") {
    // The log keeps only the newest `limit` units, however many are charged (as windows.lua).
    const r = slidingWindowStep(
      state as number[] | null,
      nowMs,
      unbounded(spec) as WindowSpec,
      units,
      spec.limit,
    );
    return { outcome: r.outcome, uncharged: r.uncharged, nextState: r.next, ttlMs: r.ttlMs };
  }
  return ALGORITHMS[spec.algorithm].step(state, nowMs, unbounded(spec), units);
}

function unbounded(spec: Exclude<LimitSpec, ConcurrencySpec>): LimitSpec {
  switch (spec.algorithm) {
    case "token_bucket":
      return { ...spec, burst: Number.POSITIVE_INFINITY };
    case "leaky_bucket":
      return { ...spec, queue: Number.POSITIVE_INFINITY };
    default:
      return { ...spec, limit: Number.POSITIVE_INFINITY };
  }
}

/** Whether a limit is debited by cost (rate limits) or holds a slot (concurrency). */
export function isRateLimit(spec: LimitSpec): spec is Exclude<LimitSpec, ConcurrencySpec> {
  return spec.algorithm !== "concurrency";
}

export const ALGORITHMS: Readonly<Record<LimitSpec["algorithm"], Algorithm>> = {
  token_bucket: tokenBucket,
  fixed_window: windowAlgorithm<FixedWindowState>(2, fixedWindowStep),
  sliding_window: windowAlgorithm<number[]>(3, slidingWindowStep),
  sliding_window_counter: windowAlgorithm<CounterState>(4, slidingCounterStep),
  leaky_bucket: leakyBucket,
  concurrency,
};
