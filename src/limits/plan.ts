// What the limiter is given to decide with, compiled once from the config (config/compile.ts)
// or from a library call (create-limiter.ts): never derived at request time.
import type { KeyBy } from "./key-by.js";
import type { LimitSpec } from "./spec.js";

/** Whose state a limit keys on when it is keyed by who calls alone (key-by.ts has the rest). */
export type { LimitScope } from "./scope.js";

/** What happens to a request when the store cannot decide (store.on_failure, route on_failure). */
export type FailurePolicy = "open" | "closed" | "local";

/** A spec and what answering about it needs, computed at compile time, never per request. */
export interface LimitFacts {
  readonly spec: LimitSpec;
  /** How a 429 describes it: `"free.search" allows 10 requests per 1m`. */
  readonly description: string;
  /** The most one caller can have at once (RateLimit-Limit, q=). */
  readonly quota: number;
  /** Window clients are told about (RateLimit-Policy w=), in whole seconds. */
  readonly windowSeconds: number;
}

/**
 * One limit as requests use it: its facts, and the same facts of the share one instance enforces
 * alone while the store is away (`on_failure: local`, store.local_fraction).
 */
export interface CompiledLimit extends LimitFacts {
  readonly local: LimitFacts;
}

/** A limit of a plan or a route: which state it keys on. */
export interface PlannedLimit extends CompiledLimit {
  readonly by: KeyBy;
  /** The plan's `tenant` limit: callers without a tenant skip it (a `by: tenant` route does not). */
  readonly tenantOnly: boolean;
  /**
   * The limit as the config wrote it (parsed): what an override that gives only some keys takes
   * the rest from (operator-state/override-rules.ts). Plain data; absent for limits made in tests.
   */
  readonly written?: Readonly<Record<string, unknown>>;
}

/**
 * What the limiter needs of a route: its name (keys, denial records), cost, failure policy, and
 * its own limits (`routes[].limits`), which bind every caller, one without a plan included.
 */
export interface LimitedRoute {
  readonly name: string;
  readonly cost: number;
  /** `max_cost`: what a token budget must have left to admit a request; undefined: its cost. */
  readonly maxCost?: number | undefined;
  readonly onFailure: FailurePolicy;
  readonly limits: readonly PlannedLimit[];
}
