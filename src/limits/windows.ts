// Window algorithms, as pure arithmetic. lua/windows.lua is the same arithmetic, operation for
// operation; the conformance suite compares the two on identical inputs.
import type { LimitOutcome, WindowSpec } from "./spec.js";

export interface WindowStep<S> {
  outcome: LimitOutcome;
  uncharged: LimitOutcome;
  /** The state to store if the request is committed. */
  next: S;
  ttlMs: number;
}

/** Fixed window: the count of the aligned window [start, start + windowMs). */
export interface FixedWindowState {
  start: number;
  count: number;
}

export function fixedWindowStep(
  state: FixedWindowState | null,
  nowMs: number,
  spec: WindowSpec,
  cost: number,
): WindowStep<FixedWindowState> {
  const start = Math.floor(nowMs / spec.windowMs) * spec.windowMs;
  const used = state !== null && state.start === start ? state.count : 0;
  const resetMs = Math.ceil(start + spec.windowMs - nowMs);
  const uncharged = { allowed: true, remaining: Math.max(0, spec.limit - used), resetMs, retryAfterMs: 0 };
  if (used + cost > spec.limit) {
    const outcome = {
      allowed: false,
      remaining: Math.max(0, spec.limit - used),
      resetMs,
      retryAfterMs: resetMs,
    };
    return { outcome, uncharged: outcome, next: { start, count: used }, ttlMs: resetMs + 1000 };
  }
  return {
    outcome: { allowed: true, remaining: spec.limit - used - cost, resetMs, retryAfterMs: 0 },
    uncharged,
    next: { start, count: used + cost },
    ttlMs: resetMs + 1000,
  };
}

/**
 * Sliding window log: the timestamps of every unit admitted in the last `windowMs`, oldest
 * first. A unit admitted at t counts while now < t + windowMs.
 */
export function slidingWindowStep(
  state: readonly number[] | null,
  nowMs: number,
  spec: WindowSpec,
  cost: number,
): WindowStep<number[]> {
  const live = (state ?? []).filter((t) => t > nowMs - spec.windowMs);
  const used = live.length;
  const fullAgainMs = used === 0 ? 0 : Math.ceil(live[used - 1]! + spec.windowMs - nowMs);
  const uncharged = {
    allowed: true,
    remaining: Math.max(0, spec.limit - used),
    resetMs: fullAgainMs,
    retryAfterMs: 0,
  };
  if (used + cost > spec.limit) {
    // The request fits once enough of the oldest units have left the window; a cost above the
    // limit never fits, and is told to wait a whole window.
    const mustLeave = used + cost - spec.limit;
    const retryAfterMs =
      cost > spec.limit ? Math.ceil(spec.windowMs) : Math.ceil(live[mustLeave - 1]! + spec.windowMs - nowMs);
    const outcome = {
      allowed: false,
      remaining: Math.max(0, spec.limit - used),
      resetMs: fullAgainMs,
      retryAfterMs,
    };
    return { outcome, uncharged: outcome, next: live, ttlMs: fullAgainMs + 1000 };
  }
  const next = [...live];
  for (let i = 0; i < cost; i++) next.push(nowMs);
  return {
    outcome: {
      allowed: true,
      remaining: spec.limit - used - cost,
      resetMs: Math.ceil(spec.windowMs),
      retryAfterMs: 0,
    },
    uncharged,
    next,
    ttlMs: Math.ceil(spec.windowMs) + 1000,
  };
}
