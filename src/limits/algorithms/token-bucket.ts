// Token bucket arithmetic, as GCRA (the generic cell rate algorithm): the state is one number,
// the theoretical arrival time (TAT) at which the bucket is full again. One number per key keeps
// Redis memory and the script small, and debt (a TAT beyond the tolerance) needs no extra field.
//
// lua/token_bucket.lua is the same arithmetic, operation for operation; the conformance suite
// runs both on identical inputs and expects identical outputs. The registry entry (code 1) at
// the end carries the rest: params, wording, quota, local share and the YAML keys.
import { z } from "zod";
import type { Rate, WindowLength } from "../notation.js";
import { formatDuration, windowLengthMs } from "../notation.js";
import type { LimitOutcome, SpecBase } from "../spec-base.js";
import { quantity } from "../units.js";
import {
  type Algorithm,
  type AlgorithmStep,
  type DurationString,
  LIMIT,
  type LimitCommon,
  RATE,
  type RateString,
  STATE_TTL_SLACK_MS,
  shareOf,
  WINDOW,
} from "./algorithm.js";

/** Token bucket: `burst` tokens, one token back every `intervalMs`. */
export interface TokenBucketSpec extends SpecBase {
  algorithm: "token_bucket";
  /** Tokens an instance reserves at a time (`batch: N`); absent: every request asks the store. */
  batch?: number;
  burst: number;
  intervalMs: number;
}

/**
 * Float error guard, in ms. Intervals like 1000/3 are not exact in binary; without the guard a
 * bucket that is exactly full could deny its last token.
 */
export const EPSILON_MS = 1e-6;

export interface TokenBucketStep {
  outcome: LimitOutcome;
  /** The TAT to store if the request is committed. */
  nextTat: number;
  /**
   * What this limit reports when another limit of the same request denies it: nothing was
   * consumed, so the tokens available now and the time to full from the current state.
   */
  uncharged: LimitOutcome;
}

export function tokenBucketStep(
  tat: number | null,
  nowMs: number,
  spec: TokenBucketSpec,
  cost: number,
): TokenBucketStep {
  return gcraStep(tat, nowMs, spec.burst, spec.intervalMs, cost);
}

/**
 * GCRA: admits `cost` units if the TAT they push out stays within `burst` intervals of now.
 * The token bucket and the leaky bucket are both this step; they read its result differently.
 */
export function gcraStep(
  tat: number | null,
  nowMs: number,
  burst: number,
  intervalMs: number,
  cost: number,
): TokenBucketStep {
  const tolerance = burst * intervalMs;
  const base = tat === null || tat < nowMs ? nowMs : tat;
  const nextTat = base + cost * intervalMs;
  const allowAt = nextTat - tolerance;
  const availableNow = Math.max(0, Math.floor((tolerance - (base - nowMs)) / intervalMs + EPSILON_MS));
  const resetNowMs = Math.ceil(base - nowMs);
  if (allowAt - nowMs > EPSILON_MS) {
    const outcome = {
      allowed: false,
      remaining: availableNow,
      resetMs: resetNowMs,
      retryAfterMs: Math.ceil(allowAt - nowMs),
    };
    return { nextTat: base, outcome, uncharged: outcome };
  }
  return {
    nextTat,
    outcome: {
      allowed: true,
      remaining: Math.max(0, Math.floor((tolerance - (nextTat - nowMs)) / intervalMs + EPSILON_MS)),
      resetMs: Math.ceil(nextTat - nowMs),
      retryAfterMs: 0,
    },
    uncharged: { allowed: true, remaining: availableNow, resetMs: resetNowMs, retryAfterMs: 0 },
  };
}

/**
 * A batch for an instance's reservation: at least `want` tokens (else denied like a request of
 * `want`), and up to `batch` of what is available now. lua/token_bucket.lua has the same step.
 */
export function tokenBucketBatchStep(
  tat: number | null,
  nowMs: number,
  spec: TokenBucketSpec,
  want: number,
  batch: number,
): TokenBucketStep & { taken: number } {
  const first = gcraStep(tat, nowMs, spec.burst, spec.intervalMs, want);
  if (!first.outcome.allowed) return withTaken(first, 0);
  const take = Math.max(want, Math.min(batch, first.uncharged.remaining));
  const step = gcraStep(tat, nowMs, spec.burst, spec.intervalMs, take);
  return step.outcome.allowed ? withTaken(step, take) : withTaken(first, want);
}

/**
 * A step with its tokens taken. Spelled out: a spread plus a new key takes V8's slow path
 * (about 1.4 µs against 0.03 µs), and steps run once per limit of every request.
 */
function withTaken(step: TokenBucketStep, taken: number): TokenBucketStep & { taken: number } {
  return { outcome: step.outcome, nextTat: step.nextTat, uncharged: step.uncharged, taken };
}

/** How long a committed state stays relevant: until the bucket is full again, plus a second. */
export function tokenBucketTtlMs(nextTat: number, nowMs: number): number {
  return Math.ceil(nextTat - nowMs) + STATE_TTL_SLACK_MS;
}

/** Token bucket (the default algorithm): a burst of `burst`, refilled at `rate`. */
export interface TokenBucketLimit extends LimitCommon {
  algorithm?: "token_bucket";
  /** Refill rate, e.g. `"5/s"`. */
  rate: RateString;
  /** Bucket capacity: how many may pass at once (at least 1). */
  burst: number;
  /** Tokens reserved at a time from the store, for very hot keys (at least 2, at most `burst`). */
  batch?: number;
}

/** Token bucket written as a quota: a burst of `limit`, refilled evenly over `window`. */
export interface TokenBucketQuotaLimit extends LimitCommon {
  algorithm?: "token_bucket";
  /** Requests per window (0 denies every request). */
  limit: number;
  /** The window `limit` is refilled over, e.g. `"1h"`. */
  window: DurationString;
  /** Tokens reserved at a time from the store, for very hot keys (at least 2, at most `limit`). */
  batch?: number;
}

const TOKEN_BUCKET_KEYS = {
  rate: RATE,
  burst: {
    schema: z.number().min(0).optional().describe("token bucket capacity; a whole number but for unit: usd"),
    example: "10",
  },
  limit: LIMIT,
  window: WINDOW,
  batch: {
    schema: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe("token bucket: tokens an instance reserves at a time, for very hot keys"),
    example: "20",
  },
} as const;

function tokenBucketWindowMs(spec: TokenBucketSpec): number {
  return spec.burst * spec.intervalMs;
}

function tokenBucketAlgorithmStep(
  state: unknown,
  nowMs: number,
  spec: TokenBucketSpec,
  cost: number,
  _leaseId?: string,
  batch?: number,
): AlgorithmStep {
  if (batch !== undefined) {
    const r = tokenBucketBatchStep(state as number | null, nowMs, spec, cost, batch);
    // The step's outcome is this call's own: extended in place, not spread (V8's slow path).
    if (r.outcome.allowed) r.outcome.taken = r.taken;
    return {
      outcome: r.outcome,
      uncharged: r.uncharged,
      nextState: r.nextTat,
      ttlMs: tokenBucketTtlMs(r.nextTat, nowMs),
    };
  }
  const { outcome, uncharged, nextTat } = tokenBucketStep(state as number | null, nowMs, spec, cost);
  return { outcome, uncharged, nextState: nextTat, ttlMs: tokenBucketTtlMs(nextTat, nowMs) };
}

/** A token bucket from rate + burst or limit + window. */
function tokenBucketShape(
  name: string,
  limit: { rate?: Rate; burst?: number; limit?: number; window?: WindowLength },
): TokenBucketSpec {
  if (limit.rate && limit.burst !== undefined) {
    return {
      algorithm: "token_bucket",
      name,
      burst: limit.burst,
      intervalMs: limit.rate.periodMs / limit.rate.count,
    };
  }
  if (limit.limit !== undefined && limit.window !== undefined) {
    // A calendar window is refused here (checks.ts): only its nominal length could be used.
    const windowMs = windowLengthMs(limit.window);
    return { algorithm: "token_bucket", name, burst: limit.limit, intervalMs: windowMs / limit.limit };
  }
  throw new Error(`limit ${name} passed validation without a usable shape`);
}

export const tokenBucket: Algorithm<TokenBucketSpec, typeof TOKEN_BUCKET_KEYS> = {
  code: 1,
  luaFile: "token_bucket.lua",
  scriptParams: (spec) => [spec.burst, spec.intervalMs],
  // A batched take: "<at least>:<up to>".
  scriptCost: (check) => (check.batch === undefined ? check.cost : `${check.cost}:${check.batch}`),
  step: tokenBucketAlgorithmStep,
  charge: (state, nowMs, spec, units) =>
    tokenBucketAlgorithmStep(state, nowMs, { ...spec, burst: Number.POSITIVE_INFINITY }, units),
  // The TAT moves back by what the request advanced it; at or before now the bucket is full.
  refund: (state, _atMs, nowMs, spec, units) => {
    if (typeof state !== "number") return undefined;
    const back = state - units * spec.intervalMs;
    return back <= nowMs ? null : { state: back, ttlMs: tokenBucketTtlMs(back, nowMs) };
  },
  quota: (spec) => spec.burst,
  windowMs: tokenBucketWindowMs,
  describe: (spec) =>
    `"${spec.name}" allows ${quantity(spec, spec.burst)}, refilled over ${formatDuration(Math.round(tokenBucketWindowMs(spec)))}`,
  // `fraction` of the burst (at least 1), refilled at `fraction` of the rate.
  localShare: (spec, fraction) => ({
    ...spec,
    burst: shareOf(spec.burst, fraction),
    intervalMs: spec.intervalMs / fraction,
  }),
  config: {
    keys: TOKEN_BUCKET_KEYS,
    needs: ["rate", "burst", "limit", "window"],
    what: "a token bucket",
    takes: "`rate` + `burst` or `limit` + `window`",
    check(limit, problem) {
      const capacity = limit.burst ?? limit.limit;
      if (limit.batch !== undefined && limit.batch < 2)
        problem("batch must be at least 2 (1 is no batching)", "batch");
      else if (limit.batch !== undefined && capacity !== undefined && limit.batch > capacity) {
        problem(`batch ${limit.batch} is more than the bucket holds (${capacity})`, "batch");
      }
      const rateForm = limit.rate !== undefined || limit.burst !== undefined;
      const windowForm = limit.limit !== undefined || limit.window !== undefined;
      if (rateForm && windowForm) {
        problem("a token bucket takes either rate + burst or limit + window, not both");
      } else if (rateForm) {
        if (limit.rate === undefined) problem("rate is missing (e.g. rate: 5/s)");
        if (limit.burst === undefined) problem("burst is missing (e.g. burst: 10)");
        if (limit.rate && limit.rate.count <= 0) problem("rate must be more than 0", "rate");
        if (limit.burst === 0) problem("burst must be at least 1", "burst");
      } else if (windowForm) {
        if (limit.limit === undefined) problem("limit is missing (e.g. limit: 100)");
        if (limit.window === undefined && limit.limit !== 0) problem("window is missing (e.g. window: 1h)");
        if (limit.window === 0) problem("window must be longer than 0", "window");
      } else {
        problem(
          "a token bucket needs rate + burst (e.g. rate: 5/s, burst: 10) or limit + window (e.g. limit: 100, window: 1h)",
        );
      }
    },
    compile(name, limit) {
      const spec = tokenBucketShape(name, limit);
      return limit.batch === undefined ? spec : { ...spec, batch: limit.batch };
    },
    capacity: (limit) => limit.burst ?? limit.limit,
  },
};
