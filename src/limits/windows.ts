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
 * Sliding window log: the timestamps of the units admitted in the last `windowMs`, oldest
 * first. A unit admitted at t counts while now < t + windowMs. Only the newest `keep` (the
 * limit) are kept: older ones leave the window first, and `limit` units already deny, so they
 * can never decide anything. A post-charge far past the limit (which runs this step with an
 * unbounded limit, keeping the real one) so costs memory and work bounded by the limit.
 */
export function slidingWindowStep(
  state: readonly number[] | null,
  nowMs: number,
  spec: WindowSpec,
  cost: number,
  keep: number = spec.limit,
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
  const added = Math.min(cost, keep);
  const next = live.slice(Math.max(0, used + added - keep));
  for (let i = 0; i < added; i++) next.push(nowMs);
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

/**
 * Sliding window counter: two aligned fixed windows, the previous one weighted by the share of
 * it that still overlaps the sliding window. O(1) memory whatever the limit, approximate
 * (it assumes the previous window's requests were spread evenly): for large limits.
 */
export interface CounterState {
  start: number;
  prev: number;
  cur: number;
}

export function slidingCounterStep(
  state: CounterState | null,
  nowMs: number,
  spec: WindowSpec,
  cost: number,
): WindowStep<CounterState> {
  const w = spec.windowMs;
  const start = Math.floor(nowMs / w) * w;
  let prev = 0;
  let cur = 0;
  if (state !== null) {
    if (state.start === start) {
      prev = state.prev;
      cur = state.cur;
    } else if (state.start === start - w) {
      prev = state.cur;
    }
  }
  const elapsed = nowMs - start;
  const estimated = (prev * (w - elapsed)) / w + cur;
  const resetMs = cur > 0 ? Math.ceil(start + 2 * w - nowMs) : prev > 0 ? Math.ceil(start + w - nowMs) : 0;
  const available = Math.max(0, Math.floor(spec.limit - estimated));
  if (estimated + cost > spec.limit) {
    let retry: number;
    if (cost > spec.limit) {
      retry = 2 * w;
    } else if (cur + cost <= spec.limit) {
      // The previous window's weight decays until the request fits.
      retry = w - elapsed - ((spec.limit - cur - cost) * w) / prev;
    } else {
      // Only the next window can fit it, once this window's count has decayed enough there.
      retry = start + w - nowMs + (cur > 0 ? w * (1 - (spec.limit - cost) / cur) : 0);
    }
    const outcome = {
      allowed: false,
      remaining: available,
      resetMs,
      retryAfterMs: Math.max(1, Math.ceil(retry)),
    };
    return { outcome, uncharged: outcome, next: { start, prev, cur }, ttlMs: resetMs + 1000 };
  }
  const next = { start, prev, cur: cur + cost };
  return {
    outcome: {
      allowed: true,
      remaining: Math.max(0, Math.floor(spec.limit - estimated - cost)),
      resetMs: Math.ceil(start + 2 * w - nowMs),
      retryAfterMs: 0,
    },
    uncharged: { allowed: true, remaining: available, resetMs, retryAfterMs: 0 },
    next,
    ttlMs: Math.ceil(start + 2 * w - nowMs) + 1000,
  };
}
