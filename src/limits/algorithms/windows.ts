// Window algorithms, as pure arithmetic. lua/windows.lua is the same arithmetic, operation for
// operation; the conformance suite compares the two on identical inputs. Their registry entries
// (codes 2, 3, 4) at the end share everything but the step: params, wording, quota, YAML keys.

import { type Calendar, periodAt, periodStarts } from "../calendar.js";
import { formatDuration, isCalendarWindow, type WindowLength, windowLengthMs } from "../notation.js";
import type { LimitOutcome, SpecBase } from "../spec-base.js";
import { quantity } from "../units.js";
import {
  type Algorithm,
  type AlgorithmStep,
  type CalendarWindowString,
  type DurationString,
  LIMIT,
  type LimitCommon,
  STATE_TTL_SLACK_MS,
  shareOf,
  WINDOW,
} from "./algorithm.js";

/**
 * Window algorithms: at most `limit` units per `windowMs`. `fixed_window` counts per aligned
 * window (cheap, allows up to 2 × limit across a boundary); `sliding_window` keeps an exact log
 * of the window (exact, memory grows with the limit: for small limits such as logins);
 * `sliding_window_counter` weighs two fixed windows (O(1) memory, approximate: large limits).
 */
export interface WindowSpec extends SpecBase {
  algorithm: "fixed_window" | "sliding_window" | "sliding_window_counter";
  limit: number;
  /** The window's length; a calendar window's nominal one (RateLimit-Policy w=), a month as 30 days. */
  windowMs: number;
  /**
   * fixed_window only: count per calendar period (a day, a Monday-to-Sunday week, a month) from
   * 00:00 in the zone, instead of per `windowMs` since the epoch. Resets are the period's end.
   */
  calendar?: Calendar;
}

export interface WindowStep<S> {
  outcome: LimitOutcome;
  uncharged: LimitOutcome;
  /** The state to store if the request is committed. */
  next: S;
  ttlMs: number;
}

/**
 * Fixed window: the count of the aligned window [start, start + windowMs), or of the calendar
 * period [start, end) that holds now.
 */
export interface FixedWindowState {
  start: number;
  count: number;
}

/** The fixed window holding nowMs: aligned on multiples of windowMs, or a calendar period. */
export function fixedWindowBounds(nowMs: number, spec: WindowSpec): { start: number; end: number } {
  if (spec.calendar !== undefined) return periodAt(nowMs, spec.calendar.unit, spec.calendar.tz);
  const start = Math.floor(nowMs / spec.windowMs) * spec.windowMs;
  return { start, end: start + spec.windowMs };
}

/**
 * How many period starts a calendar window's script param lists: the period before the one
 * holding the store's estimate of now, that one, and two after. The script decides at its own
 * clock (Redis TIME) and picks the pair that holds it, so an estimate off by up to a whole
 * period (a day at least) still finds it; one further off fails the script, never miscounts.
 */
const CALENDAR_STARTS = 4;

/**
 * A calendar window's param 2 for lua/windows.lua: the starts of CALENDAR_STARTS consecutive
 * periods around nowMs, in ms, separated by spaces (Lua has no time zone rules to compute them).
 */
export function calendarStartsParam(calendar: Calendar, nowMs: number): string {
  const cached = startsParams.get(calendar);
  if (cached !== undefined && cached.start <= nowMs && nowMs < cached.end) return cached.param;
  const { start, end } = periodAt(nowMs, calendar.unit, calendar.tz);
  const param = periodStarts(nowMs, calendar.unit, calendar.tz, 1, CALENDAR_STARTS).join(" ");
  startsParams.set(calendar, { start, end, param });
  return param;
}

// The param is the same for every instant of one period, and computing it formats a dozen dates:
// kept per compiled calendar (a spec's, shared by its local share) until its period ends.
const startsParams = new WeakMap<Calendar, { start: number; end: number; param: string }>();

export function fixedWindowStep(
  state: FixedWindowState | null,
  nowMs: number,
  spec: WindowSpec,
  cost: number,
): WindowStep<FixedWindowState> {
  const { start, end } = fixedWindowBounds(nowMs, spec);
  const used = state !== null && state.start === start ? state.count : 0;
  const resetMs = Math.ceil(end - nowMs);
  const uncharged = { allowed: true, remaining: Math.max(0, spec.limit - used), resetMs, retryAfterMs: 0 };
  if (used + cost > spec.limit) {
    const outcome = {
      allowed: false,
      remaining: Math.max(0, spec.limit - used),
      resetMs,
      retryAfterMs: resetMs,
    };
    return { outcome, uncharged: outcome, next: { start, count: used }, ttlMs: resetMs + STATE_TTL_SLACK_MS };
  }
  return {
    outcome: { allowed: true, remaining: spec.limit - used - cost, resetMs, retryAfterMs: 0 },
    uncharged,
    next: { start, count: used + cost },
    ttlMs: resetMs + STATE_TTL_SLACK_MS,
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
    return { outcome, uncharged: outcome, next: live, ttlMs: fullAgainMs + STATE_TTL_SLACK_MS };
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
    ttlMs: Math.ceil(spec.windowMs) + STATE_TTL_SLACK_MS,
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
    return { outcome, uncharged: outcome, next: { start, prev, cur }, ttlMs: resetMs + STATE_TTL_SLACK_MS };
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
    ttlMs: Math.ceil(start + 2 * w - nowMs) + STATE_TTL_SLACK_MS,
  };
}

/**
 * At most `limit` per `window`: `sliding_window` exactly (memory grows with `limit`),
 * `sliding_window_counter` approximately in O(1), `fixed_window` per clock-aligned window.
 */
export interface WindowLimit extends LimitCommon {
  algorithm: WindowSpec["algorithm"];
  /** Requests per window (0 denies every request). */
  limit: number;
  /** e.g. `"15m"`; fixed_window also `"1 day"`, `"1 week"`, `"1 month"` (calendar periods, UTC). */
  window: DurationString | CalendarWindowString;
}

/** The window a `limit: 0` reports as its reset when it names none: it never admits anyway. */
const DENY_WINDOW_MS = 3_600_000;

/**
 * `limit: 0`, whatever the algorithm: every request denied. A zero-limit fixed window says
 * exactly that in both stores, with no special path: nothing is ever consumed and every request
 * is a 429. A calendar window (fixed_window only) keeps its period: the 429 says when it ends.
 */
export function denyEverything(name: string, window: WindowLength | undefined, tz = "UTC"): WindowSpec {
  const spec: WindowSpec = {
    algorithm: "fixed_window",
    name,
    limit: 0,
    windowMs: window === undefined ? DENY_WINDOW_MS : windowLengthMs(window),
  };
  if (isCalendarWindow(window)) spec.calendar = { unit: window.calendar, tz };
  return spec;
}

/** `"chat.monthly" allows 100000 tokens per calendar month (UTC)`, `"free.search" allows 10 requests per 1m`. */
function describeWindow(spec: WindowSpec): string {
  const per =
    spec.calendar === undefined
      ? formatDuration(Math.round(spec.windowMs))
      : `calendar ${spec.calendar.unit} (${spec.calendar.tz})`;
  return `"${spec.name}" allows ${quantity(spec, spec.limit)} per ${per}`;
}

const WINDOW_KEYS = { limit: LIMIT, window: WINDOW } as const;

/**
 * One window algorithm's entry: they differ only in their step. `keep` is how many units a step
 * that logs them keeps (sliding_window: the newest `limit`); the others ignore it.
 */
function windowAlgorithm<S>(
  algorithm: WindowSpec["algorithm"],
  code: number,
  step: (state: S | null, nowMs: number, spec: WindowSpec, cost: number, keep?: number) => WindowStep<S>,
  refund?: (state: S, atMs: number, spec: WindowSpec, units: number) => S | undefined,
): Algorithm<WindowSpec, typeof WINDOW_KEYS> {
  const run = (
    state: unknown,
    nowMs: number,
    spec: WindowSpec,
    cost: number,
    keep?: number,
  ): AlgorithmStep => {
    const r = step(state as S | null, nowMs, spec, cost, keep);
    return { outcome: r.outcome, uncharged: r.uncharged, nextState: r.next, ttlMs: r.ttlMs };
  };
  return {
    code,
    luaFile: "windows.lua",
    // A calendar window's param 2 is its period starts around now (lua/windows.lua).
    scriptParams: (spec, nowMs) => [
      spec.limit,
      spec.calendar === undefined ? spec.windowMs : calendarStartsParam(spec.calendar, nowMs),
    ],
    scriptCost: (check) => check.cost,
    step: (state, nowMs, spec, cost) => run(state, nowMs, spec, cost),
    // A log keeps only the newest `limit` units, however many are charged (as windows.lua).
    charge: (state, nowMs, spec, units) =>
      run(state, nowMs, { ...spec, limit: Number.POSITIVE_INFINITY }, units, spec.limit),
    // A window's refund rewrites its count and keeps its expiry (lua/windows.lua).
    ...(refund === undefined
      ? {}
      : {
          refund: (state: unknown, atMs: number, _nowMs: number, spec: WindowSpec, units: number) => {
            if (state === null || state === undefined) return undefined;
            const next = refund(state as S, atMs, spec, units);
            return next === undefined ? undefined : { state: next };
          },
        }),
    quota: (spec) => spec.limit,
    windowMs: (spec) => spec.windowMs,
    describe: describeWindow,
    localShare: (spec, fraction) => ({ ...spec, limit: shareOf(spec.limit, fraction) }),
    config: {
      keys: WINDOW_KEYS,
      needs: ["limit", "window"],
      what: `${algorithm} (it takes limit + window)`,
      takes: "`limit` + `window`",
      calendar: algorithm === "fixed_window",
      check(limit, problem) {
        if (limit.limit === undefined) problem("limit is missing (e.g. limit: 5)");
        // limit: 0 denies everything, whatever the window; it needs none.
        if (limit.window === undefined && limit.limit !== 0) problem("window is missing (e.g. window: 15m)");
        else if (limit.window === 0) problem("window must be longer than 0", "window");
      },
      compile(name, limit, context) {
        const window = limit.window!;
        const spec: WindowSpec = { algorithm, name, limit: limit.limit!, windowMs: windowLengthMs(window) };
        // Only fixed_window takes a calendar window (checks.ts refuses it on the others).
        if (isCalendarWindow(window)) spec.calendar = { unit: window.calendar, tz: context.tz };
        return spec;
      },
      capacity: (limit) => limit.limit,
    },
  };
}

/** The units go back to the window they were taken in, if it is still the current one. */
export function fixedWindowRefund(
  state: FixedWindowState,
  atMs: number,
  spec: WindowSpec,
  units: number,
): FixedWindowState | undefined {
  if (state.start !== fixedWindowBounds(atMs, spec).start) return undefined;
  return { start: state.start, count: Math.max(0, state.count - units) };
}

/**
 * The units count in the window they were taken in: the current one, or the previous one once
 * the state has moved on a window.
 */
export function slidingCounterRefund(
  state: CounterState,
  atMs: number,
  spec: WindowSpec,
  units: number,
): CounterState | undefined {
  const start = Math.floor(atMs / spec.windowMs) * spec.windowMs;
  if (state.start === start) return { start, prev: state.prev, cur: Math.max(0, state.cur - units) };
  if (state.start === start + spec.windowMs)
    return { start: state.start, prev: Math.max(0, state.prev - units), cur: state.cur };
  return undefined;
}

export const fixedWindow = windowAlgorithm<FixedWindowState>(
  "fixed_window",
  2,
  fixedWindowStep,
  fixedWindowRefund,
);
export const slidingWindow = windowAlgorithm<number[]>("sliding_window", 3, slidingWindowStep);
export const slidingWindowCounter = windowAlgorithm<CounterState>(
  "sliding_window_counter",
  4,
  slidingCounterStep,
  slidingCounterRefund,
);
