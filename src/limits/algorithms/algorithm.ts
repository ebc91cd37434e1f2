// What one entry of the algorithm registry (index.ts) carries: everything about one algorithm,
// from its Lua code to the YAML keys it takes, so that adding an algorithm is its own file, its
// Lua file and one line of the registry. The keys several algorithms take are defined here once.
import { z } from "zod";
import { limitWindow, rate } from "../scalars.js";
import type { Check, LimitOutcome, SpecBase } from "../spec-base.js";

export interface AlgorithmStep {
  outcome: LimitOutcome;
  /** Reported instead of `outcome` when another limit of the request denies it. */
  uncharged: LimitOutcome;
  /** State to store if every limit of the request allows it (opaque to the store). */
  nextState: unknown;
  ttlMs: number;
}

export interface Algorithm<S extends SpecBase = SpecBase, K extends LimitKeys = LimitKeys> {
  /**
   * The code the Lua scripts dispatch on: `luaFile` registers the algorithm as ALGORITHMS[code]
   * (lua/prelude.lua). Below 16, the flag check.lua adds for a shadow limit.
   */
  readonly code: number;
  /**
   * The lua/ file that registers `code`. The scripts compose each file once, in registry order,
   * so a file may use the functions of a file registered before it.
   */
  readonly luaFile: string;
  /**
   * Its two script arguments (param 1, param 2 of the Lua entry): numbers, except a calendar
   * window's period starts (windows.ts), which depend on the time: `nowMs` is the store's
   * estimate of the time the script decides at.
   */
  scriptParams(spec: S, nowMs: number): [number, number | string];
  /** Its fourth script argument: the cost, or what the algorithm reads in its place. */
  scriptCost(check: Check<S>): string | number;
  /**
   * One step of its arithmetic in-process (the memory store), the same as its Lua step.
   * `leaseId` is the request's lease, for a concurrency limit; `batch`, for a batched token
   * bucket refilling a reservation. The others ignore them.
   */
  step(state: unknown, nowMs: number, spec: S, cost: number, leaseId?: string, batch?: number): AlgorithmStep;
  /**
   * A forced debit (post-charge): the step with an unbounded quota always admits, so its next
   * state is the debit, even past the limit (debt). The Lua side does the same. Absent: the
   * limit is not debited by cost but holds a slot, and a post-charge leaves it as it is.
   */
  charge?(state: unknown, nowMs: number, spec: S, units: number): AlgorithmStep;
  /**
   * Gives back `units` a check took at `atMs`, as far as it still can (lua/refund.lua's step for
   * this algorithm): into the window or bucket they were taken from, never into a later one.
   * The new state, with the TTL to write it with (absent: the key keeps its expiry), or null
   * (the key is deleted); undefined: nothing to give back (the state is from another window).
   * Absent: the algorithm's units are not given back by the memory store (only budgets are
   * settled, and the memory store never answers late).
   */
  refund?(
    state: unknown,
    atMs: number,
    nowMs: number,
    spec: S,
    units: number,
  ): { state: unknown; ttlMs?: number } | null | undefined;
  /** The most one caller can have at once (RateLimit-Limit, q=). */
  quota(spec: S): number;
  /** How long the limit takes to come back in full, in ms. */
  windowMs(spec: S): number;
  /** How a 429 describes it: `"free.search" allows 10 requests per 1m`. */
  describe(spec: S): string;
  /**
   * The limit one instance enforces alone while the store is away (on_failure: local):
   * `fraction` of it (store.local_fraction).
   */
  localShare(spec: S, fraction: number): S;
  /** How a limit of this algorithm is written in the YAML (and given to createLimiter). */
  readonly config: AlgorithmConfig<S, K>;
}

/** One key of a limit in the YAML. */
export interface LimitKey<T extends z.ZodType = z.ZodType> {
  /** Optional, with the description the configuration reference shows. */
  readonly schema: T;
  /** The example docs/configuration.md shows. */
  readonly example: string;
  /** How the reference names its type when it has a unit. */
  readonly unit?: "duration" | "rate";
}

export type LimitKeys = Readonly<Record<string, LimitKey>>;

/** A limit that passed the schema, as one algorithm reads it: its own keys, each maybe absent. */
export type ParsedLimit<K extends LimitKeys> = { [P in keyof K]?: z.output<K[P]["schema"]> };

/** Reports a problem of the limit being checked, at one of its keys or at the limit itself. */
export type LimitProblem = (message: string, key?: string) => void;

export interface AlgorithmConfig<S extends SpecBase, K extends LimitKeys> {
  /** The keys it takes besides `algorithm`, `shadow` and `unlimited`; any other is refused. */
  readonly keys: K;
  /** Those of `keys` its check asks for when missing (the reference marks them "by algorithm"). */
  readonly needs: readonly string[];
  /** How a refused key names it: `burst does not apply to ${what}`. */
  readonly what: string;
  /** What the reference says it takes, e.g. "`rate` + `queue`". */
  readonly takes: string;
  /** Problems of a limit beyond the schema (keys of other algorithms are refused already). */
  check(limit: ParsedLimit<K>, problem: LimitProblem): void;
  /**
   * Whether it counts per calendar period (`window: 1 month`); any other algorithm given a
   * calendar window is refused (checks.ts).
   */
  readonly calendar?: boolean;
  /** The spec of a limit that passed its check; `limit: 0` never gets here (denyEverything). */
  compile(name: string, limit: ParsedLimit<K>, context: CompileContext): S;
  /**
   * The most one request may cost and still be admitted; a route costing more is refused when
   * the file is loaded. Absent: route cost does not apply to it.
   */
  capacity?(limit: ParsedLimit<K>): number | undefined;
}

/** What compiling a limit needs beyond the limit itself: the config's top-level settings. */
export interface CompileContext {
  /** `calendar.tz`: the IANA zone calendar windows are aligned in (validated, default UTC). */
  tz: string;
}

/** A rate: units per second, minute, hour or day, e.g. `"5/s"`, `"100/m"`, `"1000/h"`, `"5000/d"`. */
export type RateString = `${number}/${"s" | "m" | "h" | "d"}`;
/** A duration, e.g. `"250ms"`, `"5s"`, `"15m"`, `"1h"`, `"1d"`. */
export type DurationString = `${number}${"ms" | "s" | "m" | "h" | "d"}`;
/** One calendar period (fixed_window only): from 00:00 of a day, a Monday, the 1st of a month. */
export type CalendarWindowString = `1 ${"day" | "week" | "month"}${"" | "s"}`;

/** What a limit definition may say whatever its algorithm. */
export interface LimitCommon {
  /** Evaluate and count, never deny (roll a new limit out, watch it, then drop `shadow`). */
  shadow?: boolean;
}

// The keys more than one algorithm takes.

export const RATE = {
  schema: rate().optional().describe("token refill / queue drain rate, e.g. 5/s"),
  example: "5/s",
  unit: "rate",
} as const satisfies LimitKey;

export const LIMIT = {
  schema: z
    .number()
    .min(0)
    .optional()
    .describe(
      "requests (tokens, dollars) per window; 0 denies every request; a whole number but for unit: usd",
    ),
  example: "100",
} as const satisfies LimitKey;

export const WINDOW = {
  schema: limitWindow()
    .optional()
    .describe(
      "the window `limit` applies to: a duration, or with fixed_window a calendar period (1 day, 1 week or 1 month, from 00:00 in calendar.tz)",
    ),
  example: "1h",
  unit: "duration",
} as const satisfies LimitKey;

/** `fraction` of a count one instance may grant alone: at least 1, so the limit still admits. */
export function shareOf(n: number, fraction: number): number {
  return Math.max(1, Math.floor(n * fraction));
}

/**
 * How long a limit's state outlives the moment it stops mattering (the bucket full again, the
 * window passed, the last lease expired), in ms: the key expires on its own, never while a
 * decision could still read it. lua/prelude.lua has the same constant.
 */
export const STATE_TTL_SLACK_MS = 1000;
