// The running config's limits as the admin API looks them up: which limits bind a plan's callers
// on which routes, and a limit found by its name. Read from the compiled lists the limiter uses
// (CompiledPlan.limitsByRoute, CompiledRoute.limits), so the answer is what requests get.
import type { CompiledPlan, Runtime } from "../config/compile.js";
import type { PlannedLimit } from "../limits/plan.js";

/** Route names in route order, each once (a repeated name routes nothing: the first one wins). */
function routeNames(rt: Runtime): string[] {
  return [...new Set(rt.routeList.map((r) => r.name))];
}

/** The limits a caller of `plan` meets on one route; without a plan, the route's own. */
function limitsOnRoute(rt: Runtime, plan: CompiledPlan | undefined, route: string): readonly PlannedLimit[] {
  if (plan) return plan.limitsByRoute.get(route) ?? [];
  return rt.routeList.find((r) => r.name === route)?.limits ?? [];
}

/**
 * Every limit that binds callers of `plan` (or callers without a plan), with the routes it binds
 * them on: the plan's own limits first, in plan order (a route-less global included), then the
 * routes' own limits in route order.
 */
export function applicableLimits(rt: Runtime, plan: CompiledPlan | undefined): Map<PlannedLimit, string[]> {
  const out = new Map<PlannedLimit, string[]>();
  if (plan) for (const limit of plan.limits) out.set(limit, []);
  for (const route of routeNames(rt)) {
    for (const limit of limitsOnRoute(rt, plan, route)) {
      const routes = out.get(limit);
      if (routes) routes.push(route);
      else out.set(limit, [route]);
    }
  }
  return out;
}

export interface FoundLimit {
  limit: PlannedLimit;
  /** The plan whose limit it is; undefined for a route's own limit (`routes[].limits`). */
  plan: CompiledPlan | undefined;
  /** The routes whose requests it binds, in route order. */
  routes: string[];
}

/**
 * A limit by its name: a plan's (`free.global`, `free.reports`) or a route's own
 * (`search.total`). A route named with a dot can give a route limit a plan limit's name
 * (`a.b` + `c`, plan `a` + route `b.c`); both then share their keys, and the plan's is found.
 */
export function findLimit(rt: Runtime, name: string): FoundLimit | undefined {
  for (const plan of rt.plans.values()) {
    const limit = plan.limits.find((l) => l.spec.name === name);
    if (limit) return { limit, plan, routes: applicableLimits(rt, plan).get(limit) ?? [] };
  }
  for (const route of rt.routeList) {
    const limit = route.limits.find((l) => l.spec.name === name);
    if (limit) return { limit, plan: undefined, routes: [route.name] };
  }
  return undefined;
}

/** Every limit name of the running config, for a 404 that says what exists. */
export function limitNames(rt: Runtime): string[] {
  const names = new Set<string>();
  for (const plan of rt.plans.values()) for (const l of plan.limits) names.add(l.spec.name);
  for (const route of rt.routeList) for (const l of route.limits) names.add(l.spec.name);
  return [...names];
}
