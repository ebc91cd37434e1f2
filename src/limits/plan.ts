// What the limiter is given to decide with, compiled once from the config (config/compile.ts)
// or from a library call (create-limiter.ts): never derived at request time.
import type { LimitSpec } from "./spec.js";

/** Whose state a limit keys on for one request. */
export type LimitScope = "caller" | "tenant" | "ip";

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

/** A limit of a plan for one route: which state it keys on. */
export interface PlannedLimit extends CompiledLimit {
  readonly scope: LimitScope;
  /** The plan's `tenant` limit: callers without a tenant skip it (a `by: tenant` route does not). */
  readonly tenantOnly: boolean;
}

/** What the limiter needs of a route: its name (keys, denial records), cost and failure policy. */
export interface LimitedRoute {
  readonly name: string;
  readonly cost: number;
  readonly onFailure: FailurePolicy;
}
