// When a file fails the schema, the parts of it that pass: each top-level section on its own, and
// each upstream, plan (each of its limits), route and client on its own. The cross-reference
// checks (checks.ts) run on them, so one `--check` reports a typo in a plan, a route's unknown
// upstream and a client's unknown plan together instead of one round at a time.
//
// What failed is remembered by name (`Invalid`): a plan that names a route which exists but has
// its own schema error is not told the route is unknown, and checks that read a failed section
// (the store's "one of url, cluster, sentinel") are skipped rather than repeating its error.
import type { CheckableConfig, Invalid } from "./checkable.js";
import type { PathSegment } from "./document.js";
import { isNamedLimits } from "./plan-routes.js";
import {
  type ClientConfig,
  clientSchema,
  configSchema,
  type LimitConfig,
  limitSchema,
  PLAN_NAME,
  planSchema,
  type RouteConfig,
  routeSchema,
  upstreamSchema,
} from "./schema.js";

type Plan = CheckableConfig["plans"][string];
type Upstream = CheckableConfig["upstreams"][string];

const COLLECTIONS = new Set(["upstreams", "plans", "routes", "clients"]);

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

export function salvage(raw: Record<string, unknown>): { config: CheckableConfig; invalid: Invalid } {
  const sections = new Set<string>();
  const names = {
    routes: new Set<string>(),
    plans: new Set<string>(),
    upstreams: new Set<string>(),
    clients: new Set<string>(),
  };
  const references: Invalid["references"][number][] = [];
  const out: Record<string, unknown> = {};

  const shape = configSchema.shape;
  for (const key of Object.keys(shape) as (keyof typeof shape)[]) {
    if (COLLECTIONS.has(key)) continue;
    const parsed = shape[key].safeParse(raw[key]);
    if (parsed.success) {
      out[key] = parsed.data;
      continue;
    }
    sections.add(key);
    // Its default, or (store, which has none) a stand-in no check reads: the section is skipped.
    const fallback = shape[key].safeParse(undefined);
    out[key] = fallback.success ? fallback.data : shape.store.parse({ url: "memory://" });
  }

  const upstreams: Record<string, Upstream> = {};
  if (isMapping(raw.upstreams)) {
    for (const [name, value] of Object.entries(raw.upstreams)) {
      const parsed = upstreamSchema.safeParse(value);
      if (parsed.success) upstreams[name] = parsed.data;
      else names.upstreams.add(name);
    }
  } else sections.add("upstreams");
  out.upstreams = upstreams;

  const plans: Record<string, Plan> = {};
  if (isMapping(raw.plans)) {
    for (const [name, value] of Object.entries(raw.plans)) {
      const plan = PLAN_NAME.test(name) ? salvagePlan(value) : undefined;
      if (plan) plans[name] = plan;
      else names.plans.add(name);
    }
  } else if (raw.plans !== undefined) sections.add("plans");
  out.plans = plans;

  const items = <T>(
    key: "routes" | "clients",
    schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
    failed: (item: Record<string, unknown>, i: number) => void,
  ): (T | undefined)[] => {
    const list = raw[key];
    if (!Array.isArray(list)) {
      if (list !== undefined || key === "routes") sections.add(key);
      return [];
    }
    // An empty list of routes fails the schema's "at least one"; there is nothing to refer to.
    if (list.length === 0 && key === "routes") sections.add(key);
    return list.map((item, i) => {
      const parsed = schema.safeParse(item);
      if (parsed.success) return parsed.data;
      if (isMapping(item)) failed(item, i);
      return undefined;
    });
  };
  /** A failed item's own field, if that field alone passes its schema. */
  const field = (schema: { safeParse(v: unknown): { success: boolean } }, value: unknown) =>
    typeof value === "string" && schema.safeParse(value).success ? value : undefined;

  out.routes = items<RouteConfig>("routes", routeSchema, (item, i) => {
    if (typeof item.name === "string") names.routes.add(item.name);
    const upstream = field(routeSchema.shape.upstream, item.upstream);
    if (upstream !== undefined) references.push(ref(["routes", i, "upstream"], "upstream", upstream));
  });
  out.clients = items<ClientConfig>("clients", clientSchema, (item, i) => {
    if (typeof item.id === "string") names.clients.add(item.id);
    const plan = field(clientSchema.shape.plan, item.plan);
    if (plan !== undefined) references.push(ref(["clients", i, "plan"], "plan", plan));
  });

  return { config: out as CheckableConfig, invalid: { sections, names, references } };
}

function ref(path: PathSegment[], kind: "upstream" | "plan", name: string) {
  return { path, kind, name };
}

/** A plan with the limits that pass; undefined when it is not even a mapping. */
function salvagePlan(value: unknown): Plan | undefined {
  const whole = planSchema.safeParse(value);
  if (whole.success) return whole.data;
  if (!isMapping(value)) return undefined;
  const limit = (v: unknown): LimitConfig | undefined => {
    const parsed = limitSchema.safeParse(v);
    return parsed.success ? parsed.data : undefined;
  };
  const plan: Plan = { routes: {} };
  const global = value.global === undefined ? undefined : limit(value.global);
  const tenant = value.tenant === undefined ? undefined : limit(value.tenant);
  if (global) plan.global = global;
  if (tenant) plan.tenant = tenant;
  if (isMapping(value.routes)) {
    for (const [route, v] of Object.entries(value.routes)) {
      if (isNamedLimits(v)) {
        // The named limits that pass, each alone.
        const named = Object.fromEntries(
          Object.entries(v).flatMap(([name, l]) => {
            const parsed = limit(l);
            return parsed ? [[name, parsed]] : [];
          }),
        );
        if (Object.keys(named).length > 0) plan.routes[route] = named;
        continue;
      }
      const parsed = limit(v);
      if (parsed) plan.routes[route] = parsed;
    }
  }
  return plan;
}
