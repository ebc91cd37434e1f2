// Leaky bucket as a queue: the GCRA of the token bucket with a tolerance of `queue + 1`
// intervals, where the admitted request is not served at once but at its slot, the TAT it
// found (base). The delay is the distance to that slot. lua/leaky_bucket.lua (code 5) reads the
// same step the same way.
import { z } from "zod";
import { formatDuration } from "../notation.js";
import type { SpecBase } from "../spec-base.js";
import { type Algorithm, type AlgorithmStep, type LimitCommon, RATE, type RateString } from "./algorithm.js";
import { gcraStep, type TokenBucketStep, tokenBucketTtlMs } from "./token-bucket.js";

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

export function leakyBucketStep(
  tat: number | null,
  nowMs: number,
  spec: LeakyBucketSpec,
  cost: number,
): TokenBucketStep {
  const step = gcraStep(tat, nowMs, spec.queue + 1, spec.intervalMs, cost);
  // uncharged.resetMs is ceil(base - now): how far the request's slot is from now.
  const delayMs = step.uncharged.resetMs;
  // The step and its outcome are this call's own: extended in place (a spread with a new key
  // takes V8's slow path, and this runs for every leaky-bucket request).
  if (step.outcome.allowed && delayMs > 0) step.outcome.delayMs = delayMs;
  return step;
}

/**
 * Leaky bucket: one unit leaves every `1/rate`; up to `queue` more may wait. An allowed
 * decision's `delayMs` is how long to wait before doing the work.
 */
export interface LeakyBucketLimit extends LimitCommon {
  algorithm: "leaky_bucket";
  /** How fast the queue drains, e.g. `"10/s"`. */
  rate: RateString;
  /** How many may wait for their slot. */
  queue: number;
}

const LEAKY_BUCKET_KEYS = {
  rate: RATE,
  queue: {
    schema: z.number().int().min(0).optional().describe("leaky bucket: requests that may wait"),
    example: "50",
  },
} as const;

function leakyBucketAlgorithmStep(
  state: unknown,
  nowMs: number,
  spec: LeakyBucketSpec,
  cost: number,
): AlgorithmStep {
  const { outcome, uncharged, nextTat } = leakyBucketStep(state as number | null, nowMs, spec, cost);
  return { outcome, uncharged, nextState: nextTat, ttlMs: tokenBucketTtlMs(nextTat, nowMs) };
}

export const leakyBucket: Algorithm<LeakyBucketSpec, typeof LEAKY_BUCKET_KEYS> = {
  code: 5,
  // Composed after token_bucket.lua, whose GCRA it reads.
  luaFile: "leaky_bucket.lua",
  // The queue plus the request being served.
  scriptParams: (spec) => [spec.queue + 1, spec.intervalMs],
  scriptCost: (check) => check.cost,
  step: leakyBucketAlgorithmStep,
  charge: (state, nowMs, spec, units) =>
    leakyBucketAlgorithmStep(state, nowMs, { ...spec, queue: Number.POSITIVE_INFINITY }, units),
  quota: (spec) => spec.queue + 1,
  windowMs: (spec) => (spec.queue + 1) * spec.intervalMs,
  describe: (spec) =>
    `"${spec.name}" serves one request every ${formatDuration(Math.round(spec.intervalMs))} and queues ${spec.queue}; the queue is full`,
  // The queue may be 0 (serve one at a time, queue none): its share stays 0 then.
  localShare: (spec, fraction) => ({
    ...spec,
    queue: Math.floor(spec.queue * fraction),
    intervalMs: spec.intervalMs / fraction,
  }),
  config: {
    keys: LEAKY_BUCKET_KEYS,
    needs: ["rate", "queue"],
    what: "a leaky bucket (it takes rate + queue)",
    takes: "`rate` + `queue`",
    check(limit, problem) {
      if (limit.rate === undefined) problem("rate is missing: how fast the queue drains (e.g. rate: 10/s)");
      else if (limit.rate.count <= 0) problem("rate must be more than 0", "rate");
      if (limit.queue === undefined) problem("queue is missing: how many requests may wait (e.g. queue: 50)");
    },
    compile: (name, limit) => ({
      algorithm: "leaky_bucket",
      name,
      queue: limit.queue!,
      intervalMs: limit.rate!.periodMs / limit.rate!.count,
    }),
  },
};
