// What `--check` finds wrong with AI routes and budgets beyond the schema: an AI route with a
// budget but no output ceiling to reserve, a money budget without prices (or priced finer than a
// micro-dollar can hold), keys that read a request body where none is read, settings that mean
// nothing on an AI route, and a budgeted route that forwards bodies without ever reading what
// they cost.

import { parsePrice } from "../ai/prices.js";
import { parseKeyBy, readsBody } from "../limits/key-by.js";
import type { CheckableConfig } from "./checkable.js";
import type { PathSegment } from "./document.js";
import { planRouteLimits } from "./plan-routes.js";
import type { LimitConfig, RouteConfig } from "./schema.js";

type Add = (path: PathSegment[], message: string, atKey?: string) => void;

/** Where a limit is written and the routes it can apply to (undefined: every route). */
interface PlacedLimit {
  at: PathSegment[];
  limit: LimitConfig;
  routes: readonly string[] | undefined;
}

/** Every limit of the file with the routes it applies to: plans', routes' own and clients'. */
function placedLimits(config: CheckableConfig): PlacedLimit[] {
  const out: PlacedLimit[] = [];
  for (const [planName, plan] of Object.entries(config.plans)) {
    if (plan.global) out.push({ at: ["plans", planName, "global"], limit: plan.global, routes: undefined });
    if (plan.tenant) out.push({ at: ["plans", planName, "tenant"], limit: plan.tenant, routes: undefined });
    for (const { route: routeName, name, limit } of planRouteLimits(plan.routes))
      out.push({
        at: ["plans", planName, "routes", routeName, ...(name ? [name] : [])],
        limit,
        routes: [routeName],
      });
  }
  config.routes.forEach((route, i) => {
    if (!route) return;
    for (const [name, limit] of Object.entries(route.limits))
      out.push({ at: ["routes", i, "limits", name], limit, routes: [route.name] });
  });
  config.clients.forEach((client, i) => {
    if (!client?.limits) return;
    if (client.limits.global)
      out.push({ at: ["clients", i, "limits", "global"], limit: client.limits.global, routes: undefined });
    for (const { route: routeName, name, limit } of planRouteLimits(client.limits.routes))
      out.push({
        at: ["clients", i, "limits", "routes", routeName, ...(name ? [name] : [])],
        limit,
        routes: [routeName],
      });
  });
  return out;
}

/**
 * A function naming the budget a route's warnings speak of: the first money budget that applies
 * to it (plans' global and tenant before their routes', in file order), else the first other
 * budget, else undefined. Indexed once by route, so the checks take time linear in limits plus
 * routes: filtering every limit for every route was 2,000 plans times 2,000 routes, a quarter of
 * a second per reload (and the growth test in config.test.ts failing on a busy machine).
 */
function budgetsByRoute(placed: readonly PlacedLimit[]): (route: string) => PlacedLimit | undefined {
  const first = (list: PlacedLimit[]) => list.find((p) => p.limit.unit === "usd") ?? list[0];
  const everyRoute: PlacedLimit[] = [];
  const byRoute = new Map<string, PlacedLimit[]>();
  placed.forEach((p) => {
    if (p.limit.unit === undefined || p.limit.unit === "requests" || p.limit.unlimited) return;
    if (p.routes === undefined) everyRoute.push(p);
    else
      for (const r of p.routes) {
        const list = byRoute.get(r);
        if (list) list.push(p);
        else byRoute.set(r, [p]);
      }
  });
  const everywhere = first(everyRoute);
  const order = new Map(placed.map((p, i) => [p, i]));
  return (route) => {
    const own = byRoute.get(route);
    const mine = own === undefined ? undefined : first(own);
    if (mine === undefined || everywhere === undefined) return mine ?? everywhere;
    const usd = (p: PlacedLimit) => p.limit.unit === "usd";
    if (usd(mine) !== usd(everywhere)) return usd(mine) ? mine : everywhere;
    return order.get(mine)! < order.get(everywhere)! ? mine : everywhere;
  };
}

const BODY_METHODS = ["POST", "PUT", "PATCH"];

/** Whether a route forwards requests that carry a body (its methods allow one, or it has none). */
function takesBodies(route: RouteConfig): boolean {
  const methods = route.match.methods;
  return methods === undefined || methods.some((m) => BODY_METHODS.includes(m.toUpperCase()));
}

export function checkAiConfig(config: CheckableConfig, add: Add, warn: Add): void {
  const routes = config.routes.filter((r): r is RouteConfig => r !== undefined);
  const aiRoutes = new Set(routes.filter((r) => r.ai !== undefined).map((r) => r.name));
  const everyRouteAi = routes.length > 0 && routes.every((r) => r.ai !== undefined);
  const placed = placedLimits(config);

  let money: PlacedLimit | undefined;
  for (const p of placed) {
    if (p.limit.unit === "usd" && !p.limit.unlimited) {
      money ??= p;
      if (p.routes !== undefined && !p.routes.some((r) => aiRoutes.has(r)))
        add(
          p.at,
          `a money budget (unit: usd) is charged only on AI routes, which price their usage: route "${p.routes[0]}" has no ai, so it would never count; add ai: { format } to the route, or remove unit`,
          "unit",
        );
    }
    if (p.limit.by === undefined) continue;
    const by = parseKeyBy(p.limit.by);
    if ("error" in by || !readsBody(by)) continue;
    const nonAi = p.routes === undefined ? !everyRouteAi : p.routes.some((r) => !aiRoutes.has(r));
    if (nonAi)
      add(
        [...p.at, "by"],
        p.routes === undefined
          ? "body:<field> reads an AI route's request body, but this limit applies to every route and some are not AI routes (their bodies are never read, so every such request would be keyed by its caller); key it in the plan's entry for an AI route instead"
          : `body:<field> reads an AI route's request body, but route "${p.routes[0]}" has no ai: its body is never read, so every request would be keyed by its caller; add ai: { format } to the route, or key by something its requests carry (header:<name>)`,
      );
  }

  if (money && config.models === undefined)
    add(
      money.at,
      "a money budget (unit: usd) needs prices: add a top-level models table, e.g. models: { gpt-4o: { input: 2.5, output: 10 }, default: { input: 5, output: 15 } } (dollars per million tokens)",
      "unit",
    );
  checkPrices(config, add);

  const budgetOver = budgetsByRoute(placed);
  config.routes.forEach((route, i) => {
    if (!route) return;
    const at: PathSegment[] = ["routes", i];
    const budget = budgetOver(route.name);
    if (route.ai === undefined) {
      if (budget !== undefined && takesBodies(route)) {
        const sources = Array.isArray(route.charge) ? route.charge : [route.charge];
        if (!sources.includes("usage"))
          warn(
            at,
            budget.limit.unit === "usd"
              ? `route "${route.name}" forwards request bodies under money budget ${budgetName(budget)}, which is charged only on AI routes: its requests cost nothing of it, so a completion behind this route is free; make it an AI route (ai: { format: openai }), or limit its methods to GET`
              : `route "${route.name}" forwards request bodies under budget ${budgetName(budget)}, but never reads what its answers used: each request costs its cost (${route.cost}) of it, so a completion behind this route is almost free; make it an AI route (ai: { format: openai }), add charge: usage, or limit its methods to GET`,
          );
      }
      return;
    }
    if (route.usage_fields !== undefined)
      add([...at, "usage_fields"], "an AI route reads usage by its ai.format; remove usage_fields");
    const sources = Array.isArray(route.charge) ? route.charge : [route.charge];
    if (sources.includes("usage"))
      add([...at, "charge"], "an AI route reads usage by its ai.format; remove charge: usage");
    if (route.max_cost !== undefined)
      add(
        [...at, "max_cost"],
        "an AI route reserves each request's own estimate (its prompt and output ceiling) instead of a max_cost; remove max_cost, and set ai.max_output",
      );
    if (budget !== undefined && route.ai.max_output === undefined)
      add(
        [...at, "ai"],
        `route "${route.name}" is under budget ${budgetName(budget)}: ai.max_output is required, the output ceiling a request that names none is reserved and forwarded with (e.g. max_output: 4096)`,
      );
    if (route.ai.output_field !== undefined && route.ai.format !== "openai")
      add(
        [...at, "ai", "output_field"],
        `output_field applies to format openai; ${route.ai.format} requests have one ceiling field (${route.ai.format === "anthropic" ? "max_tokens" : "max_output_tokens"})`,
      );
    if (route.ai.max_output !== undefined && route.ai.clamp && route.ai.min_output > route.ai.max_output)
      add(
        [...at, "ai", "min_output"],
        `min_output ${route.ai.min_output} is above max_output ${route.ai.max_output}: no request could be lowered to it`,
      );
  });
}

function budgetName(p: PlacedLimit): string {
  return p.at.join(".");
}

/** Each price must be one a micro-dollar table can hold: at most six decimals per million. */
function checkPrices(config: CheckableConfig, add: Add): void {
  if (config.models === undefined) return;
  for (const [model, row] of Object.entries(config.models)) {
    for (const key of [
      "input",
      "output",
      "cached_input",
      "cache_write",
      "cache_write_1h",
      "audio_input",
      "audio_output",
    ] as const) {
      const price = row[key];
      if (price === undefined) continue;
      const parsed = parsePrice(price);
      if (typeof parsed === "string") add(["models", model, key], parsed);
    }
  }
}
