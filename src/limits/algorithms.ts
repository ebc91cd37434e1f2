// The algorithm registry shared by both stores: how a spec becomes script arguments (Redis) and
// how one step of its arithmetic runs in-process (memory). New algorithms are added here once.
import type { LimitOutcome, LimitSpec } from "./spec.js";
import { tokenBucketStep, tokenBucketTtlMs } from "./token-bucket.js";

export interface AlgorithmStep {
  outcome: LimitOutcome;
  /** Reported instead of `outcome` when another limit of the request denies it. */
  uncharged: LimitOutcome;
  /** State to store if every limit of the request allows it. */
  nextState: number;
  ttlMs: number;
}

export interface Algorithm {
  /** The code check.lua dispatches on. */
  code: number;
  scriptParams(spec: LimitSpec): [number, number];
  step(state: number | null, nowMs: number, spec: LimitSpec, cost: number): AlgorithmStep;
}

const tokenBucket: Algorithm = {
  code: 1,
  scriptParams: (spec) => [spec.burst, spec.intervalMs],
  step(state, nowMs, spec, cost) {
    const { outcome, uncharged, nextTat } = tokenBucketStep(state, nowMs, spec, cost);
    return { outcome, uncharged, nextState: nextTat, ttlMs: tokenBucketTtlMs(nextTat, nowMs) };
  },
};

export const ALGORITHMS: Readonly<Record<LimitSpec["algorithm"], Algorithm>> = {
  token_bucket: tokenBucket,
};
