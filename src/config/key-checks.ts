// What `--check` finds wrong with a limit's `by` (and the names of route limits) that the schema,
// which reads one `by` at a time, cannot see: a part that can never vary or never be read, a
// credential written into state keys, a tenant budget that is not the tenant's, a route limit
// named like a plan limit, and a client override that would resize a budget other callers share.
// key-by.ts parses each part; these checks relate it to the rest of the file.

import { foldHeaderName } from "../http/header-names.js";
import { type KeyBy, type KeyPart, parseKeyBy, partText } from "../limits/key-by.js";
import { normalizeTarget } from "../routing/normalize.js";
import type { CheckableConfig, Invalid } from "./checkable.js";
import type { PathSegment } from "./document.js";
import { planRouteLimits } from "./plan-routes.js";
import type { LimitConfig, RouteConfig } from "./schema.js";

type Add = (path: PathSegment[], message: string, atKey?: string) => void;

/** One written `by`, where it is, and the route it keys requests of (when only one). */
interface Written {
  at: PathSegment[];
  limit: LimitConfig;
  route: RouteConfig | undefined;
  /** A route's own limit (`routes[].limits`): one budget every caller shares. */
  shared?: boolean;
}

/**
 * Every `by` of the plans and the routes' own limits. Clients' overrides may not have one
 * (checkOverrideBy); the rest of their checks are the plan's limit's.
 */
export function checkKeyBys(
  config: CheckableConfig,
  invalid: Invalid,
  routeByName: ReadonlyMap<string, RouteConfig>,
  add: Add,
  warn: Add,
) {
  const written: Written[] = [];
  for (const [planName, plan] of Object.entries(config.plans)) {
    const at = (...path: PathSegment[]): PathSegment[] => ["plans", planName, ...path];
    if (plan.global) written.push({ at: at("global"), limit: plan.global, route: undefined });
    if (plan.tenant) {
      written.push({ at: at("tenant"), limit: plan.tenant, route: undefined });
      checkTenantBy(at("tenant"), planName, plan.tenant, add);
    }
    for (const { route: routeName, name, limit } of planRouteLimits(plan.routes))
      written.push({
        at: at("routes", routeName, ...(name ? [name] : [])),
        limit,
        route: routeByName.get(routeName),
      });
  }
  config.routes.forEach((route, i) => {
    if (!route) return;
    for (const [name, limit] of Object.entries(route.limits))
      written.push({ at: ["routes", i, "limits", name], limit, route, shared: true });
  });

  // Without the identity section (it failed the schema), which identity is configured is unknown.
  const identity = invalid.sections.has("identity") ? undefined : config.identity;
  const apiKeyHeader = identity?.api_key.header.toLowerCase();
  let refused = 0;
  const counted: Add = (path, message, atKey) => {
    refused++;
    add(path, message, atKey);
  };
  for (const w of written) {
    if (w.limit.by === undefined) continue;
    const by = parseKeyBy(w.limit.by);
    if ("error" in by) continue;
    const before = refused;
    by.parts.forEach((part, j) => {
      const at: PathSegment[] = typeof w.limit.by === "string" ? [...w.at, "by"] : [...w.at, "by", j];
      if (part.kind === "claim" && identity && !identity.jwt) {
        counted(
          at,
          `${partText(part)} reads a claim of a verified JWT, but this file has no identity.jwt: no caller would carry one, so every request would be keyed by its caller instead; configure identity.jwt, or key by something requests carry (header:<name>)`,
        );
      }
      const secret = part.kind === "header" ? secretIn(part.name, apiKeyHeader) : undefined;
      if (secret) {
        counted(
          at,
          `${partText(part)} carries ${secret}: keying by it would write callers' secrets into state keys and the admin API; key by caller instead (one budget per client the credential names)`,
        );
      }
      if (part.kind === "header" && part.name.startsWith("tollgate-")) {
        counted(
          at,
          `${partText(part)} is a header the gateway sets for the upstream (Tollgate-Client, -Tenant, -Plan) and drops from clients: key by caller, tenant or claim:<name> instead`,
        );
      }
      if (part.kind === "segment" && w.route) {
        const problem = fixedSegment(part.index, w.route);
        if (problem) counted(at, problem);
      }
    });
    // A `by` already refused above is fixed first; its warning would repeat the same advice.
    if (refused > before) continue;
    const chosen = clientChosenOnly(by.parts, w.route, config.routes, w.shared === true);
    if (chosen) {
      warn(
        [...w.at, "by"],
        `by: ${by.text} is made only of what the client writes (${chosen}): a client that writes another value gets a budget of its own; add caller (by: [caller, ${by.parts.map(partText).join(", ")}]) to keep it per caller, or, for a header a trusted proxy sets, list it in the route's trusted_headers`,
      );
    }
  }
  checkRouteLimitNames(config, add);
}

/**
 * The client-chosen parts of a key made of nothing else, as text; undefined when some part is
 * the gateway's own (caller, tenant, ip, a verified claim) or every chosen header is one a
 * trusted proxy sets (`trusted_headers` of the route, or of every route for a plan's global and
 * tenant limits), nor a path segment of a route's shared budget. A model named in an AI route's body is the model the upstream runs and bills:
 * keyed by it, each model's budget is what that model costs, which another value cannot evade.
 */
function clientChosenOnly(
  parts: readonly KeyPart[],
  route: RouteConfig | undefined,
  routes: readonly (RouteConfig | undefined)[],
  shared: boolean,
): string | undefined {
  const chosen: string[] = [];
  for (const part of parts) {
    switch (part.kind) {
      case "route":
        continue;
      case "header": {
        const trustedBy = (r: RouteConfig | undefined) =>
          r?.trusted_headers.some((h) => h.toLowerCase() === part.name) ?? false;
        const known = routes.filter((r): r is RouteConfig => r !== undefined);
        if (route ? trustedBy(route) : known.length > 0 && known.every(trustedBy)) continue;
        chosen.push(partText(part));
        continue;
      }
      case "body":
        if (part.name === "model" && (route ? route.ai !== undefined : false)) continue;
        chosen.push(partText(part));
        continue;
      case "segment":
        // A route's shared budget per path segment is one per resource served (an organisation's
        // data): another value is another resource's budget, the caller's own limits still apply.
        if (shared) continue;
        chosen.push(partText(part));
        continue;
      case "query":
        chosen.push(partText(part));
        continue;
      default:
        return undefined;
    }
  }
  return chosen.length > 0 ? chosen.join(", ") : undefined;
}

/**
 * A segment within the route's path prefix is the same in every request the route takes (up to
 * letter case: the prefix matches case-insensitively), so it keys nothing, or worse, a client
 * changing its case gets a fresh budget. Known for a route's entries and its own limits only: a
 * plan's global and tenant limits key every route's requests.
 */
function fixedSegment(index: number, route: RouteConfig): string | undefined {
  const normalized = normalizeTarget(route.match.path);
  // A path that is not a plain prefix is reported on its own (checks.ts).
  if (!normalized.ok || normalized.query) return undefined;
  const fixed = normalized.path.split("/").filter((s) => s !== "");
  if (index > fixed.length) return undefined;
  const fixes = fixed.length === 1 ? "segment 1" : `segments 1 to ${fixed.length}`;
  return `segment:${index} is "${fixed[index - 1]}" in every request of route "${route.name}" (its path ${route.match.path} fixes ${fixes}): it keys nothing but its letter case, which a client may change to get a fresh budget; key by segment:${fixed.length + 1}, the first segment that varies`;
}

/** The plan's `tenant` limit is the budget a tenant's clients share: its key must hold the tenant. */
function checkTenantBy(at: PathSegment[], planName: string, limit: LimitConfig, add: Add) {
  if (limit.by === undefined) return;
  const by = parseKeyBy(limit.by);
  if ("error" in by || by.parts.some((p) => p.kind === "tenant")) return;
  const rest = by.parts.filter((p) => p.kind !== "caller" && p.kind !== "ip").map(partText);
  const fix = rest.length ? `[tenant, ${rest.join(", ")}]` : "tenant";
  add(
    [...at, "by"],
    `plans.${planName}.tenant is the budget a tenant's clients share, but by: ${by.text} has no tenant part, so it would not be the tenant's; write by: ${fix}, or make this limit global or a route limit to key it otherwise`,
  );
}

/**
 * A route limit is named `<route>.<name>`, a plan's `<plan>.global`, `<plan>.tenant` and
 * `<plan>.<route>`. Route names may hold dots, so route `a.b`'s limit `c` and plan `a`'s entry
 * for route `b.c` are both `a.b.c`: one name in RateLimit headers, 429 bodies, logs and the
 * admin API, and for the same `by` one state key, which two limits of different sizes would
 * fight over.
 */
function checkRouteLimitNames(config: CheckableConfig, add: Add) {
  const planLimits = new Map<string, string>();
  for (const [planName, plan] of Object.entries(config.plans)) {
    if (plan.global) planLimits.set(`${planName}.global`, `plan "${planName}"'s global limit`);
    if (plan.tenant) planLimits.set(`${planName}.tenant`, `plan "${planName}"'s tenant limit`);
    for (const { route: routeName, name, suffix } of planRouteLimits(plan.routes)) {
      const full = `${planName}.${suffix}`;
      const what =
        name === undefined
          ? `plan "${planName}"'s limit for route "${routeName}"`
          : `plan "${planName}"'s limit "${name}" for route "${routeName}"`;
      // Route names may hold dots: `search.daily: {…}` and `search: { daily: {…} }` are both
      // `free.search.daily`, one state key two limits of different algorithms would overwrite.
      const other = planLimits.get(full);
      if (other !== undefined) {
        add(
          ["plans", planName, "routes", ...(name === undefined ? [] : [routeName])],
          `${what} is named "${full}", as ${other} is: the two would share RateLimit headers, 429 bodies, logs, admin views and their state key, each overwriting the other's count; rename one`,
          name ?? routeName,
        );
        continue;
      }
      planLimits.set(full, what);
    }
  }
  if (planLimits.size === 0) return;
  config.routes.forEach((route, i) => {
    if (!route) return;
    for (const name of Object.keys(route.limits)) {
      const other = planLimits.get(`${route.name}.${name}`);
      if (other === undefined) continue;
      add(
        ["routes", i, "limits"],
        `this limit is named "${route.name}.${name}", as ${other} is: the two would share RateLimit headers, 429 bodies, logs and admin views, and state keys when keyed alike; rename this limit`,
        name,
      );
    }
  });
}

/**
 * An override sizes a plan's limit for one client; how the limit is keyed stays the plan's
 * (compile.ts keeps the plan's `by`), so a `by` here would be ignored.
 */
export function checkOverrideBy(at: PathSegment[], planLimit: string, limit: LimitConfig, add: Add) {
  if (limit.by === undefined) return;
  add(
    at,
    `an override sizes ${planLimit} for this client, and how it is keyed stays the plan's; remove by here (by in ${planLimit} keys it for every caller of the plan)`,
    "by",
  );
}

/**
 * Who shares a plan limit keyed `by` when it has no caller part: one budget that several callers
 * measure, each with the size its own override would give it. Undefined: the budget is each
 * caller's own, and an override may size it.
 */
export function sharedBy(by: KeyBy, global: boolean): string | undefined {
  if (by.parts.some((p) => p.kind === "caller")) return undefined;
  const has = (kind: KeyPart["kind"]) => by.parts.some((p) => p.kind === kind);
  let who = has("tenant") ? "every client of a tenant" : "every caller of the plan";
  if (has("ip")) who = has("tenant") ? `${who} from one address` : "every caller from one address";
  if (global && has("route")) who += " on one route";
  const values = by.parts
    .filter((p) => p.kind !== "tenant" && p.kind !== "ip" && p.kind !== "route")
    .map(partText);
  return values.length ? `${who} with the same ${values.join(" and ")}` : who;
}

/**
 * What secret a header carries, if it is a credential: what clients authenticate with, to the
 * gateway or to the upstream (CGI-style `_` spellings, and PHP's `.`, fold onto the same header).
 */
function secretIn(name: string, apiKeyHeader: string | undefined): string | undefined {
  const folded = foldHeaderName(name);
  if (folded === "authorization") return "bearer keys and JWTs";
  if (folded === "proxy-authorization") return "proxy credentials";
  if (folded === "cookie") return "session cookies";
  if (apiKeyHeader !== undefined && folded === foldHeaderName(apiKeyHeader)) return "API keys";
  return undefined;
}
