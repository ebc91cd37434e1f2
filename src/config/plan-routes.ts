// A plan's entry for a route is one limit (`search: { rate: 10/s }`, named `<plan>.search`) or a
// map of named limits (`search: { per-second: { rate: 10/s }, daily: { limit: 10000, window:
// 1d } }`, named `<plan>.search.per-second` and `<plan>.search.daily`), all decided in the one
// check. This is the one place that tells the two forms apart; everything else walks the list.
import type { LimitConfig } from "./schema.js";

/** What `plans.<plan>.routes.<route>` (and a client's `limits.routes.<route>`) holds. */
export type PlanRouteEntry = LimitConfig | Readonly<Record<string, LimitConfig>>;

export interface PlanRouteLimit {
  route: string;
  /** The limit's own name in the map form; undefined for the single form. */
  name: string | undefined;
  /** What follows the plan's name in the limit's name: `search` or `search.daily`. */
  suffix: string;
  limit: LimitConfig;
}

const isMapping = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The map form: a non-empty mapping whose every value is a mapping. A limit's own keys hold
 * scalars (rate, burst, by, …), so the two never look alike.
 */
export function isNamedLimits(entry: unknown): entry is Readonly<Record<string, LimitConfig>> {
  if (!isMapping(entry)) return false;
  const values = Object.values(entry);
  return values.length > 0 && values.every(isMapping);
}

/** The limits of one route's entry, in the order written. */
export function entryLimits(route: string, entry: PlanRouteEntry): PlanRouteLimit[] {
  if (!isNamedLimits(entry)) return [{ route, name: undefined, suffix: route, limit: entry as LimitConfig }];
  return Object.entries(entry).map(([name, limit]) => ({ route, name, suffix: `${route}.${name}`, limit }));
}

/** Every limit of a plan's (or a client's) `routes`, route by route, each map in its order. */
export function planRouteLimits(routes: Readonly<Record<string, PlanRouteEntry>>): PlanRouteLimit[] {
  return Object.entries(routes).flatMap(([route, entry]) => entryLimits(route, entry));
}
