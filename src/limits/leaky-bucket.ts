// Leaky bucket as a queue: the GCRA of the token bucket with a tolerance of `queue + 1`
// intervals, where the admitted request is not served at once but at its slot, the TAT it
// found (base). The delay is the distance to that slot. lua/check.lua (code 5) reads the same
// step the same way.
import type { LeakyBucketSpec } from "./spec.js";
import { gcraStep, type TokenBucketStep } from "./token-bucket.js";

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
