// Checks the schema cannot express: names that must refer to each other, duplicates, routes and
// plans nothing can reach, limits that are impossible to satisfy, and features this version does
// not build yet. Each problem points at the node to fix. Errors refuse the file; warnings (a plan
// no caller can have) are reported and the file is used.
//
// The checks also run on the parts of a file that passed the schema when other parts did not
// (load.ts salvages them), so one pass reports every problem. `Invalid` then says what is missing
// and why: a reference to an item that exists but failed the schema is not reported as unknown.

import { atMostSixDecimals } from "../ai/prices.js";
import { unfetchableUrl } from "../identity/idp/fetch-json.js";
import { parseCidr } from "../identity/ip.js";
import { ALGORITHM_KEYS, ALGORITHMS, DEFAULT_ALGORITHM } from "../limits/algorithms/index.js";
import { parseKeyBy } from "../limits/key-by.js";
import { normalizeHostPattern } from "../routing/host.js";
import { competingRoutes, HTTP_METHODS, methodSet } from "../routing/matcher.js";
import { normalizeTarget } from "../routing/normalize.js";
import { parseUsageFields } from "../usage/fields.js";
import { checkAdminTokens } from "./admin-tokens.js";
import { checkAiConfig } from "./ai-checks.js";
import { checkAlerts } from "./alert-checks.js";
import { ANONYMOUS_PLAN, hasTokenBudgets } from "./compile.js";
import type { PathSegment } from "./document.js";
import { checkHeaderRules } from "./header-checks.js";
import { checkKeyBys, checkOverrideBy, sharedBy } from "./key-checks.js";
import { entryLimits, isNamedLimits, type PlanRouteEntry, planRouteLimits } from "./plan-routes.js";
import { suggest } from "./problems.js";
import { type ClientConfig, type Config, LIMIT_NAME, type LimitConfig, type RouteConfig } from "./schema.js";
import { formatDuration, isCalendarWindow, windowLengthMs } from "./units.js";

export interface PathProblem {
  path: PathSegment[];
  message: string;
  /** Point at this key of the map at `path` rather than at the map. */
  atKey?: string;
  /** Reported, but the file is used. */
  warning?: true;
}

/**
 * Keys of which exactly one must be given, by the dotted path of the object that holds them
 * (`[]`: each item of the list). The checks below refuse none or several; the configuration
 * reference (docs.ts) marks them required from this same list.
 */
export const EXACTLY_ONE = {
  store: ["url", "cluster", "sentinel"],
  "identity.jwt": ["secret", "public_key_file", "jwks_file", "jwks_url"],
  "clients[]": ["key_sha256", "key"],
  "upstreams.<name>": ["url", "targets"],
} as const;

/** Keys of which at least one must be given, as EXACTLY_ONE. */
export const AT_LEAST_ONE = {
  "identity.jwt": ["claims.plan", "default_plan"],
} as const;

/** Maps that need at least one entry (routes, a list, says so in the schema). */
export const NOT_EMPTY = ["upstreams"] as const;

import type { CheckableConfig, Invalid } from "./checkable.js";

export type { CheckableConfig, Invalid };

const NOTHING_INVALID: Invalid = {
  sections: new Set(),
  names: { routes: new Set(), plans: new Set(), upstreams: new Set(), clients: new Set() },
  references: [],
};

/** Names listed in full after an unknown one; a longer list is only counted. */
const KNOWN_LISTED = 20;
/**
 * Unknown names that get a "did you mean" hint. Each hint compares the name with every known
 * one, so a file with thousands of unknown names among thousands of known ones would take
 * quadratic time for hints nobody reads past the first screen.
 */
const HINTS = 100;

function hints(): (word: string, known: readonly string[]) => string {
  let left = HINTS;
  return (word, known) => {
    const s = left-- > 0 ? suggest(word, known) : undefined;
    if (s) return ` (did you mean "${s}"?)`;
    if (known.length === 0) return "";
    return known.length <= KNOWN_LISTED ? ` (known: ${known.join(", ")})` : ` (${known.length} known)`;
  };
}

type Add = (path: PathSegment[], message: string, atKey?: string) => void;

/** Shorter than this, a plain `key:` in the YAML is guessable (128 bits is 32 hex digits). */
const MIN_PLAIN_KEY = 32;

export function checkConfig(config: CheckableConfig, invalid: Invalid = NOTHING_INVALID): PathProblem[] {
  const problems: PathProblem[] = [];
  const add: Add = (path, message, atKey) =>
    problems.push(atKey === undefined ? { path, message } : { path, message, atKey });
  const warn: Add = (path, message, atKey) =>
    problems.push(
      atKey === undefined ? { path, message, warning: true } : { path, message, atKey, warning: true },
    );
  const didYouMean = hints();
  const has = (map: object, key: string) => Object.hasOwn(map, key);

  checkStoreAndWorkers(config, invalid, add);
  checkAdminTokens(config.admin, add);

  // A name is known when an item gives it, or when the item or the whole section that would
  // give it failed the schema (that failure is reported; "unknown" would only repeat it).
  const upstreamNames = Object.keys(config.upstreams);
  const knownUpstream = (name: string) =>
    has(config.upstreams, name) || invalid.names.upstreams.has(name) || invalid.sections.has("upstreams");
  const knownPlan = (name: string) =>
    has(config.plans, name) || invalid.names.plans.has(name) || invalid.sections.has("plans");
  if (upstreamNames.length === 0 && invalid.names.upstreams.size === 0 && !invalid.sections.has("upstreams"))
    add(["upstreams"], "at least one upstream is needed");
  checkUpstreams(config, add, warn);

  const routeNames = new Set<string>();
  config.routes.forEach((route, i) => {
    if (!route) return;
    if (routeNames.has(route.name)) add(["routes", i, "name"], `duplicate route name "${route.name}"`);
    routeNames.add(route.name);
    if (!knownUpstream(route.upstream)) {
      add(
        ["routes", i, "upstream"],
        `unknown upstream "${route.upstream}"${didYouMean(route.upstream, upstreamNames)}`,
      );
    }
  });
  checkRouteMatches(config, add, warn, didYouMean);
  checkRouteRewrites(config, add, warn);
  checkRouteCharges(config, add, warn);
  checkAiConfig(config, add, warn);
  checkHeaderRules(config, add);
  checkAlerts(config, add, warn);

  const planNames = Object.keys(config.plans);
  const routeNameList = [...routeNames];
  const knownRoute = (name: string) =>
    routeNames.has(name) || invalid.names.routes.has(name) || invalid.sections.has("routes");
  const routeCosts = routesByCost(config);
  const anyAiRoute = config.routes.some((r) => r?.ai !== undefined);
  for (const [planName, plan] of Object.entries(config.plans)) {
    plan.allow?.routes?.forEach((name, i) => {
      if (!knownRoute(name))
        add(
          ["plans", planName, "allow", "routes", i],
          `unknown route "${name}"${didYouMean(name, routeNameList)}`,
        );
    });
    if (plan.allow?.models && !anyAiRoute && !invalid.sections.has("routes"))
      warn(
        ["plans", planName, "allow", "models"],
        "allow.models is matched against the model an AI route's request names, and no route has ai: it would refuse nothing; add ai: { format } to the routes it is for, or remove it",
      );
    if (plan.global) checkLimit(["plans", planName, "global"], plan.global, add);
    if (plan.tenant) checkLimit(["plans", planName, "tenant"], plan.tenant, add);
    for (const [routeName, entry] of Object.entries(plan.routes)) {
      if (!knownRoute(routeName)) {
        add(
          ["plans", planName, "routes"],
          `unknown route "${routeName}"${didYouMean(routeName, routeNameList)}`,
          routeName,
        );
        continue;
      }
      for (const { name, limit } of entryLimits(routeName, entry)) {
        if (name !== undefined && !LIMIT_NAME.test(name)) {
          add(
            ["plans", planName, "routes", routeName],
            `a plan route limit's name may only hold letters, digits, "_" and "-" (1 to 64 of them): the limit is named <plan>.<route>.<name>`,
            name,
          );
          continue;
        }
        checkLimit(["plans", planName, "routes", routeName, ...(name ? [name] : [])], limit, add);
      }
    }
    checkCosts(["plans", planName], plan, routeCosts, add);
  }

  const clientIds = new Set<string>();
  const keys = new Set<string>();
  const routeByName = new Map<string, RouteConfig>();
  for (const route of config.routes)
    if (route && !routeByName.has(route.name)) routeByName.set(route.name, route);
  checkKeyBys(config, invalid, routeByName, add, warn);
  config.clients.forEach((client, i) => {
    if (!client) return;
    if (clientIds.has(client.id)) add(["clients", i, "id"], `duplicate client id "${client.id}"`);
    clientIds.add(client.id);
    const given = EXACTLY_ONE["clients[]"].filter((k) => client[k] !== undefined);
    if (given.length !== 1) add(["clients", i], "give exactly one of key_sha256 (recommended) or key");
    const keyId = client.key_sha256?.toLowerCase() ?? `plain:${client.key}`;
    if (keys.has(keyId)) add(["clients", i], "another client has the same key");
    keys.add(keyId);
    // A key the config holds passes the auth-failure throttle (it is told valid by a hash and a
    // map), so guessing it is limited by nothing but its length; memory:// is a local trial.
    const sharedStore = !(config.store.url ?? "").startsWith("memory://");
    if (client.key !== undefined && client.key.length < MIN_PLAIN_KEY && sharedStore)
      warn(
        ["clients", i, "key"],
        `a key of ${client.key.length} characters can be guessed: identity.auth_failures does not slow guesses of keys the config holds; use ${MIN_PLAIN_KEY} random characters or more (openssl rand -hex 16), or issue keys with tollgate keys create`,
      );
    if (!knownPlan(client.plan)) {
      add(["clients", i, "plan"], `unknown plan "${client.plan}"${didYouMean(client.plan, planNames)}`);
    }
    if (client.limits) {
      const plan = has(config.plans, client.plan) ? config.plans[client.plan] : undefined;
      checkClientLimits(["clients", i, "limits"], client, plan, routeByName, routeCosts, add, didYouMean);
    }
  });
  for (const ref of invalid.references) {
    if (ref.kind === "upstream" && !knownUpstream(ref.name))
      add(ref.path, `unknown upstream "${ref.name}"${didYouMean(ref.name, upstreamNames)}`);
    if (ref.kind === "plan" && !knownPlan(ref.name))
      add(ref.path, `unknown plan "${ref.name}"${didYouMean(ref.name, planNames)}`);
  }
  checkReachablePlans(config, invalid, warn);

  const clientIdList = [...clientIds];
  const knownClient = (id: string) =>
    clientIds.has(id) || invalid.names.clients.has(id) || invalid.sections.has("clients");
  const checkCidrs = (path: PathSegment[], list: readonly string[]) =>
    list.forEach((text, i) => {
      if (!parseCidr(text))
        add([...path, i], `"${text}" is not an IP address or CIDR such as 10.0.0.0/8 or ::1/128`);
    });
  checkCidrs(["identity", "trusted_proxies"], config.identity.trusted_proxies);
  for (const list of ["deny", "exempt"] as const) {
    checkCidrs([list, "ips"], config[list].ips);
    config[list].clients.forEach((id, i) => {
      if (!knownClient(id))
        add([list, "clients", i], `unknown client "${id}"${didYouMean(id, clientIdList)}`);
    });
  }
  return problems;
}

type Plan = Config["plans"][string];
type RouteCosts = ReturnType<typeof routesByCost>;

/**
 * A route whose cost exceeds a bucket's burst could never be admitted: that is a config bug.
 * Each limit is compared with the costliest routes only (routes sorted by cost once), so many
 * plans times many routes stays linear. `at` holds `global`, `tenant` and `routes`.
 */
function checkCosts(
  at: PathSegment[],
  limits: Pick<Plan, "global" | "tenant"> & { routes: Plan["routes"] },
  routeCosts: RouteCosts,
  add: Add,
) {
  for (const key of ["global", "tenant"] as const) {
    const burst = burstOf(limits[key]);
    if (burst === undefined) continue;
    const { costliest, count } = routeCosts.over(burst);
    if (!costliest) continue;
    const more = count > 1 ? ` (and ${count - 1} more route${count > 2 ? "s" : ""})` : "";
    add(
      [...at, key],
      `route "${costliest.name}" costs ${costliest.cost}, more than this limit's ${burst}: it could never be admitted${more}`,
    );
  }
  for (const { route: routeName, name, limit } of planRouteLimits(limits.routes)) {
    const burst = burstOf(limit);
    const cost = routeCosts.cost.get(routeName);
    if (burst !== undefined && cost !== undefined && cost > burst) {
      add(
        [...at, "routes", routeName, ...(name ? [name] : [])],
        `route "${routeName}" costs ${cost}, more than this limit's ${burst}: it could never be admitted`,
      );
    }
  }
}

/**
 * A client's `limits` replace limits its plan has, keeping their names and so their state: a
 * key the plan lacks would be a limit of the client's own, under a name no plan gives it. Only
 * state the client alone keys on can take its own sizes: the plan's `tenant` limit, and any
 * limit whose `by` (its own, else its route's `by`, else caller) has no caller part, are one
 * state shared with other callers, which would then disagree on what it holds (a counter one of
 * them may fill past the other's limit). An override keeps the plan's `by`, so it may not give
 * one. Without the plan (unknown or failed), the keys cannot be compared and only the limits are.
 */
function checkClientLimits(
  at: PathSegment[],
  client: ClientConfig,
  plan: Plan | undefined,
  routeByName: ReadonlyMap<string, RouteConfig>,
  routeCosts: RouteCosts,
  add: Add,
  didYouMean: (word: string, known: readonly string[]) => string,
) {
  const limits = client.limits!;
  const where = `plans.${client.plan}`;
  if (limits.tenant) {
    add(
      at,
      client.tenant === undefined
        ? "this client has no tenant, so no tenant limit applies to it (nor could a client size one); remove tenant here"
        : `a client cannot size its tenant's limit: ${where}.tenant is one budget shared by every client of tenant "${client.tenant}", and they would disagree on its size; change ${where}.tenant, or override global to size this client alone`,
      "tenant",
    );
  }
  if (limits.global) {
    checkOverrideBy([...at, "global"], `${where}.global`, limits.global, add);
    if (plan && !plan.global)
      add(
        at,
        `plan "${client.plan}" has no global limit to override; add global to ${where}, or remove it here`,
        "global",
      );
    const shared = sharedPlanLimit(`${where}.global`, plan?.global?.by, true);
    if (shared) add(at, shared, "global");
    checkLimit([...at, "global"], limits.global, add);
  }
  const checked: Record<string, PlanRouteEntry> = {};
  for (const [routeName, entry] of Object.entries(limits.routes)) {
    const route = routeByName.get(routeName);
    if (!plan) {
      for (const { name, limit, suffix } of entryLimits(routeName, entry)) {
        const path = [...at, "routes", routeName, ...(name ? [name] : [])];
        checkOverrideBy(path, `${where}.routes.${suffix}`, limit, add);
        checkLimit(path, limit, add);
      }
      continue;
    }
    if (!Object.hasOwn(plan.routes, routeName)) {
      const planRoutes = Object.keys(plan.routes);
      add(
        [...at, "routes"],
        planRoutes.length === 0
          ? `plan "${client.plan}" has no route limits to override; add ${routeName} to ${where}.routes, or remove it here`
          : `plan "${client.plan}" has no limit for route "${routeName}" to override${didYouMean(routeName, planRoutes)}; add it to ${where}.routes, or remove it here`,
        routeName,
      );
      continue;
    }
    const planned = plan.routes[routeName]!;
    if (isNamedLimits(entry) !== isNamedLimits(planned)) {
      add(
        [...at, "routes"],
        isNamedLimits(planned)
          ? `${where}.routes.${routeName} is a map of named limits (${Object.keys(planned).join(", ")}): size them by name here, e.g. ${routeName}: { ${Object.keys(planned)[0]}: { … } }`
          : `${where}.routes.${routeName} is one limit: size it here as one limit, not a map of named limits`,
        routeName,
      );
      continue;
    }
    const sized: Record<string, LimitConfig> = {};
    for (const { name, limit, suffix } of entryLimits(routeName, entry)) {
      const path = [...at, "routes", routeName, ...(name ? [name] : [])];
      const planLimit =
        name === undefined ? (planned as LimitConfig) : (planned as Record<string, LimitConfig>)[name];
      checkOverrideBy(path, `${where}.routes.${suffix}`, limit, add);
      if (planLimit === undefined) {
        const names = Object.keys(planned);
        add(
          [...at, "routes", routeName],
          `plan "${client.plan}" has no limit "${name}" for route "${routeName}" to override${didYouMean(name!, names)}; add it to ${where}.routes.${routeName}, or remove it here`,
          name,
        );
        continue;
      }
      const planBy = planLimit.by;
      if (planBy === undefined && route?.by !== undefined) {
        add(
          path.slice(0, -1),
          `route "${routeName}" is limited by ${route.by}: ${where}.routes.${suffix} is one budget shared by every ${route.by === "tenant" ? "client of a tenant" : "caller from one address"}, and they would disagree on its size; change it in the plan instead`,
          String(path[path.length - 1]),
        );
        continue;
      }
      const shared = sharedPlanLimit(`${where}.routes.${suffix}`, planBy, false);
      if (shared) {
        add(path.slice(0, -1), shared, String(path[path.length - 1]));
        continue;
      }
      checkLimit(path, limit, add);
      if (name === undefined) checked[routeName] = limit;
      else sized[name] = limit;
    }
    if (Object.keys(sized).length > 0) checked[routeName] = sized;
  }
  checkCosts(at, { global: limits.global, routes: checked }, routeCosts, add);
}

/**
 * Why a client cannot size a plan limit written `by: <written>`: it has no caller part, so it is
 * one budget several callers share (key-checks.ts says whose). Undefined: keyed by caller.
 */
function sharedPlanLimit(planLimit: string, written: LimitConfig["by"], global: boolean) {
  if (written === undefined) return undefined;
  const by = parseKeyBy(written);
  if ("error" in by) return undefined;
  const who = sharedBy(by, global);
  return (
    who &&
    `${planLimit} is keyed by ${by.text}, with no caller part: it is one budget shared by ${who}, and they would disagree on its size; change it in the plan instead`
  );
}

/** The methods a route can receive, for hints. */
const ROUTABLE_METHODS = HTTP_METHODS.filter((m) => m !== "CONNECT");

/**
 * A route path is a prefix, so anything that reads as a pattern is a mistake: a glob (`*`, `?`,
 * `[...]`), a template parameter (`{id}`, `<id>`, `:id`) or a regular expression (`|`, `^`, a
 * trailing `$`). Found before the path is normalised, which would refuse some of them with a
 * less helpful reason and take `*` literally.
 */
const PATTERN = /[*?{}[\]<>|^]|\/:[A-Za-z_]|\$$/;

/** The prefix a pattern path most likely meant: the whole segments before the pattern. */
function prefixBefore(path: string, index: number): string {
  const start = path.lastIndexOf("/", index);
  // "/login*" and "/login$": a pattern at the very end of a segment with a literal before it.
  const prefix =
    /^[*?$]+$/.test(path.slice(index)) && index > start + 1 ? path.slice(0, index) : path.slice(0, start);
  return prefix.replace(/\/+$/, "") || "/";
}

/**
 * Methods, paths, and routes another route shadows, following the matcher (routing/matcher.ts):
 * the longest prefix first, then on one prefix the routes of the most specific host, then the
 * routes that name methods before catch-alls. A shorter prefix never shadows a longer one (a
 * request falls through to it only when no route of the longer prefix takes its method), and a
 * route of one host never shadows a route of another or of none (each serves Hosts the other
 * does not), so only routes of one host (or none) and one prefix can shadow each other.
 */
function checkRouteMatches(
  config: CheckableConfig,
  add: Add,
  warn: Add,
  didYouMean: (word: string, known: readonly string[]) => string,
) {
  interface Matchable {
    i: number;
    name: string;
    matchPrefix: string;
    methods: ReadonlySet<string> | null;
    host: string | null;
    /** The methods the route lists (upper-case, known, once each) with their index in the list. */
    listed: { method: string; j: number }[];
  }
  const matchable: Matchable[] = [];
  config.routes.forEach((route, i) => {
    if (!route) return;
    const listed: { method: string; j: number }[] = [];
    let unknown = 0;
    route.match.methods?.forEach((written, j) => {
      const method = written.toUpperCase();
      const at: PathSegment[] = ["routes", i, "match", "methods", j];
      if (!HTTP_METHODS.includes(method)) {
        unknown++;
        add(at, `unknown method "${written}"${didYouMean(written, ROUTABLE_METHODS)}`);
      } else if (method === "CONNECT") {
        unknown++;
        add(at, "CONNECT requests never reach a route: the gateway does not tunnel CONNECT");
      } else if (listed.some((l) => l.method === method)) {
        warn(at, `${method} is listed twice`);
      } else listed.push({ method, j });
    });

    const path = route.match.path;
    const at: PathSegment[] = ["routes", i, "match", "path"];
    const pattern = PATTERN.exec(path);
    if (pattern) {
      const index = pattern[0].startsWith("/") ? pattern.index + 1 : pattern.index;
      const prefix = prefixBefore(path, index);
      add(
        at,
        `"${path}" looks like a pattern, but route paths are plain prefixes (no wildcards, parameters or regular expressions): path: ${prefix} matches ${prefix} and every path below it`,
      );
      return;
    }
    const normalized = normalizeTarget(path);
    if (!normalized.ok || normalized.query) {
      add(at, `"${path}" is not a plain path (${normalized.ok ? "it has a query" : normalized.reason})`);
      return;
    }
    const written = path.toLowerCase();
    if (
      normalized.matchPath !== (written.length > 1 && written.endsWith("/") ? written.slice(0, -1) : written)
    ) {
      warn(
        at,
        `"${path}" matches requests as "${normalized.path}": request paths are normalized before matching (dot segments resolved, "//" merged, ";parameters" dropped); write "${normalized.path}"`,
      );
    }
    // A route whose every method is refused above matches nothing it could be compared with.
    if (unknown > 0 && listed.length === 0) return;
    matchable.push({
      i,
      name: route.name,
      matchPrefix: normalized.matchPath,
      methods: listed.length ? methodSet(listed.map((l) => l.method)) : null,
      host: route.match.host === undefined ? null : normalizeHostPattern(route.match.host),
      listed,
    });
  });

  for (const group of competingRoutes(matchable)) {
    let catchAll: Matchable | undefined;
    /** Which route of this prefix takes each method, and whether only as GET's HEAD. */
    const taken = new Map<string, { by: Matchable; implied: boolean }>();
    for (const route of group) {
      if (route.methods === null) {
        if (catchAll)
          add(
            ["routes", route.i, "match"],
            `matches the same requests as route "${catchAll.name}", so one of them can never apply`,
          );
        else catchAll = route;
        continue;
      }
      const lost = route.listed.flatMap((l) => {
        const t = taken.get(l.method);
        return t ? [{ ...l, ...t }] : [];
      });
      const note = (l: { implied: boolean }) => (l.implied ? " (a GET route answers HEAD too)" : "");
      if (lost.length === route.listed.length) {
        const by = [...new Set(lost.map((l) => l.by))];
        if (by.length === 1) {
          add(
            ["routes", route.i, "match"],
            `matches the same requests as route "${by[0]!.name}"${lost.some((l) => l.implied) ? note({ implied: true }) : ""}, so one of them can never apply`,
          );
        } else {
          const takes = by.map((r) => {
            const mine = lost.filter((l) => l.by === r);
            return `route "${r.name}" takes ${mine.map((l) => l.method).join(" and ")}${mine.some((l) => l.implied) ? note({ implied: true }) : ""}`;
          });
          add(["routes", route.i, "match"], `can never apply: ${takes.join(", ")}`);
        }
      } else {
        for (const l of lost) {
          add(
            ["routes", route.i, "match", "methods", l.j],
            `${l.method} requests to this path go to route "${l.by.name}"${note(l)}, never to this one`,
          );
        }
      }
      for (const method of route.methods) {
        if (!taken.has(method))
          taken.set(method, { by: route, implied: !route.listed.some((l) => l.method === method) });
      }
    }
  }
}

/**
 * `strip_prefix` and `rewrite` (routing/rewrite.ts): one of them, a prefix that is sent as it is
 * written (a normalised path: the upstream gets exactly it), and something to replace.
 */
function checkRouteRewrites(config: CheckableConfig, add: Add, warn: Add) {
  config.routes.forEach((route, i) => {
    if (!route) return;
    const at: PathSegment[] = ["routes", i];
    const prefix = route.rewrite?.prefix;
    if (route.strip_prefix && prefix !== undefined)
      add(
        [...at, "strip_prefix"],
        "give strip_prefix or rewrite, not both: each replaces the matched prefix (rewrite: { prefix: / } strips it too)",
      );
    if (prefix !== undefined) {
      const normalized = normalizeTarget(prefix);
      const tidy = normalized.ok ? normalized.path.replace(/(.)\/+$/, "$1") : undefined;
      if (!normalized.ok || normalized.query) {
        add(
          [...at, "rewrite", "prefix"],
          `"${prefix}" is not a plain path (${normalized.ok ? "it has a query" : normalized.reason})`,
        );
      } else if (tidy !== prefix) {
        add(
          [...at, "rewrite", "prefix"],
          `"${prefix}" is sent to the upstream as written, so it must be a normalised path without a trailing slash (dot segments resolved, "//" merged, ";parameters" dropped); write "${tidy}"`,
        );
      }
    }
    const match = normalizeTarget(route.match.path);
    if (!match.ok || match.matchPath !== "/") return;
    if (route.strip_prefix)
      warn(
        [...at, "strip_prefix"],
        "this route's match.path is /: there is no prefix to strip, so strip_prefix does nothing",
      );
    if (prefix === "/")
      warn(
        [...at, "rewrite", "prefix"],
        "this route's match.path is /: there is no prefix to replace, so rewrite.prefix / does nothing",
      );
  });
}

/**
 * `charge`, `usage_fields` and `max_cost` of each route: fields that parse, read only where the
 * body is read, and a max_cost no smaller than what the route takes anyway.
 */
function checkRouteCharges(config: CheckableConfig, add: Add, warn: Add) {
  config.routes.forEach((route, i) => {
    if (!route) return;
    const at: PathSegment[] = ["routes", i];
    const sources = Array.isArray(route.charge) ? route.charge : [route.charge];
    if (new Set(sources).size !== sources.length)
      add([...at, "charge"], "each of header and usage may be listed once");
    if (route.usage_fields !== undefined) {
      if (!sources.includes("usage")) {
        add(
          [...at, "usage_fields"],
          "usage_fields are read only with charge: usage (or [header, usage]); add it or remove usage_fields",
        );
      } else {
        const parsed = parseUsageFields(route.usage_fields);
        if ("error" in parsed)
          add(
            Array.isArray(route.usage_fields) && parsed.at !== undefined
              ? [...at, "usage_fields", parsed.at]
              : [...at, "usage_fields"],
            parsed.error,
          );
      }
    }
    if (route.max_cost !== undefined && route.max_cost < route.cost)
      add(
        [...at, "max_cost"],
        `max_cost ${route.max_cost} is less than this route's cost ${route.cost}, which every request takes anyway; raise it to at least ${route.cost} or remove it`,
      );
    if (route.max_cost !== undefined && !hasTokenBudgets(config))
      warn(
        [...at, "max_cost"],
        "max_cost only applies to token budgets (limits with unit: tokens), and no limit has one: it does nothing",
      );
  });
}

/**
 * A plan applies to a caller only through a client that names it, as the plan of callers without
 * a credential (`anonymous`), or through a JWT: its default_plan, or any plan when tokens carry a
 * plan claim. Any other plan is dead text that looks like a limit.
 */
function checkReachablePlans(config: CheckableConfig, invalid: Invalid, warn: Add) {
  // Without the clients or the identity section, what reaches a plan is unknown.
  if (invalid.sections.has("clients") || invalid.sections.has("identity")) return;
  const jwt = config.identity.jwt;
  if (jwt?.claims.plan !== undefined) return;
  const planNames = Object.keys(config.plans);
  const reached = new Set<string>([ANONYMOUS_PLAN]);
  let hintsLeft = HINTS;
  const reach = (name: string) => {
    // An unknown plan is reported as such, with the plan it most likely meant: that plan is not
    // also reported as never used. (As many as get a hint: each costs a pass over the plans.)
    const meant = Object.hasOwn(config.plans, name)
      ? name
      : hintsLeft-- > 0
        ? suggest(name, planNames)
        : undefined;
    if (meant !== undefined) reached.add(meant);
  };
  for (const client of config.clients) if (client) reach(client.plan);
  for (const ref of invalid.references) if (ref.kind === "plan") reach(ref.name);
  if (jwt?.default_plan !== undefined) reach(jwt.default_plan);
  // With a write token, keys issued at runtime (POST /admin/keys) may name any plan.
  const issuesKeys =
    Boolean(config.admin.token) || (config.admin.tokens ?? []).some((t) => t?.scope !== "read");
  for (const name of planNames) {
    if (reached.has(name)) continue;
    const anonymous = suggest(name, [ANONYMOUS_PLAN])
      ? ` (did you mean "${ANONYMOUS_PLAN}", the plan of callers without a credential?)`
      : "";
    if (issuesKeys && !anonymous) continue;
    warn(
      ["plans"],
      `plan "${name}" is never used: no client has it${jwt ? " and it is not identity.jwt.default_plan" : ""}${anonymous}`,
      name,
    );
  }
}

/**
 * The capacity a route's cost is compared with, as the limit's algorithm says (a bucket's burst,
 * a window's limit); none for an algorithm route cost does not apply to.
 */
function burstOf(limit: LimitConfig | undefined): number | undefined {
  // A money budget counts dollars, which no route's cost is written in.
  if (!limit || limit.unlimited || limit.unit === "usd") return undefined;
  const burst = ALGORITHMS[limit.algorithm ?? DEFAULT_ALGORITHM].config.capacity?.(limit);
  return burst !== undefined && burst > 0 ? burst : undefined;
}

/** Routes by cost, costliest first, to find those above a capacity without visiting the rest. */
function routesByCost(config: CheckableConfig) {
  const routes = config.routes.filter((r): r is RouteConfig => r !== undefined);
  const sorted = routes
    .map((r, i) => ({ name: r.name, cost: r.cost, i }))
    .sort((a, b) => b.cost - a.cost || a.i - b.i);
  const cost = new Map<string, number>();
  for (const r of routes) if (!cost.has(r.name)) cost.set(r.name, r.cost);
  return {
    cost,
    /** The costliest route and how many routes cost more than `capacity`. */
    over(capacity: number): { costliest: { name: string; cost: number } | undefined; count: number } {
      // The first index whose cost is within the capacity: every route before it is over.
      let lo = 0;
      let hi = sorted.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (sorted[mid]!.cost > capacity) lo = mid + 1;
        else hi = mid;
      }
      return { costliest: sorted[0] && lo > 0 ? sorted[0] : undefined, count: lo };
    },
  };
}

/** The algorithms a token budget may use: those debited by cost, in O(1) state per key. */
const TOKEN_BUDGET_ALGORITHMS: readonly string[] = ["fixed_window", "sliding_window_counter", "token_bucket"];

export function checkLimit(
  path: PathSegment[],
  limit: LimitConfig,
  add: (p: PathSegment[], m: string, k?: string) => void,
) {
  if (limit.unlimited !== undefined) {
    const others = Object.keys(limit).filter((k) => k !== "unlimited");
    if (limit.unlimited !== true)
      add(path, "unlimited can only be true; remove it to limit this scope", "unlimited");
    else if (others.length)
      add(path, `unlimited: true cannot be combined with ${others.join(", ")}`, others[0]);
    return;
  }
  const { config } = ALGORITHMS[limit.algorithm ?? DEFAULT_ALGORITHM];
  if (limit.unit === "tokens" || limit.unit === "usd") {
    const algorithm = limit.algorithm ?? DEFAULT_ALGORITHM;
    const what = limit.unit === "usd" ? "a money budget (unit: usd)" : "a token budget (unit: tokens)";
    if (!TOKEN_BUDGET_ALGORITHMS.includes(algorithm))
      add(
        path,
        `${what} is a fixed_window, sliding_window_counter or token_bucket: ${algorithm} counts requests, not units; change the algorithm or remove unit`,
        "unit",
      );
    else if (limit.batch !== undefined)
      add(
        path,
        `${what} is charged after each response, which a batch reserved ahead cannot follow; remove batch`,
        "batch",
      );
  }
  checkAmounts(path, limit, add);
  // A key of another algorithm is refused, never ignored.
  for (const key of Object.keys(ALGORITHM_KEYS) as (keyof typeof ALGORITHM_KEYS)[]) {
    if (limit[key] !== undefined && !(key in config.keys))
      add(path, `${key} does not apply to ${config.what}`, key);
  }
  // A calendar period is counted per period, which only a fixed window does; another algorithm
  // would silently turn `1 month` into a rolling 30 days.
  if (isCalendarWindow(limit.window) && !config.calendar && "window" in config.keys) {
    const algorithm = limit.algorithm === undefined ? `${DEFAULT_ALGORITHM}, the default` : limit.algorithm;
    add(
      path,
      `window: ${formatDuration(limit.window)} is a calendar window, which only fixed_window counts (this limit is ${algorithm}): add algorithm: fixed_window, or write a rolling window such as ${formatDuration(windowLengthMs(limit.window))}`,
      "window",
    );
  }
  config.check(limit, (message, key) => add(path, message, key));
}

/**
 * `limit`, `burst` and a rate's count are whole numbers, but in a money budget, which is written in
 * dollars and kept in micro-dollars: at most six decimals there.
 */
function checkAmounts(path: PathSegment[], limit: LimitConfig, add: Add) {
  const amounts: [string, number | undefined][] = [
    ["limit", limit.limit],
    ["burst", limit.burst],
    ["rate", limit.rate?.count],
  ];
  for (const [key, value] of amounts) {
    if (value === undefined) continue;
    if (limit.unit === "usd") {
      if (!atMostSixDecimals(value))
        add(
          path,
          `${key} ${value} has more than six decimals: a money budget is kept to the micro-dollar`,
          key,
        );
    } else if (key !== "rate" && !Number.isInteger(value)) {
      add(
        path,
        `${key} must be a whole number (${value} is not): only a money budget (unit: usd) is written in dollars with decimals`,
        key,
      );
    }
  }
}

function checkJwt(config: CheckableConfig, invalid: Invalid, add: Add) {
  const jwt = config.identity.jwt;
  if (!jwt) return;
  const path: PathSegment[] = ["identity", "jwt"];
  const sources = EXACTLY_ONE["identity.jwt"].filter((k) => jwt[k] !== undefined);
  // `issuer` alone is a key source too (OIDC discovery); beside another, only the iss required.
  const discovery = sources.length === 0 && jwt.issuer !== undefined;
  if (sources.length !== 1 && !discovery) {
    add(
      path,
      sources.length === 0
        ? "jwt needs a key: exactly one of secret, public_key_file, jwks_file or jwks_url, or issuer alone (its keys found by OIDC discovery)"
        : `jwt takes exactly one of secret, public_key_file, jwks_file or jwks_url, not ${sources.join(" and ")}`,
    );
  }
  checkRemoteKeys(jwt, discovery, path, add);
  if (jwt.secret !== undefined && jwt.secret.length < 32) {
    add(
      path,
      "secret must be at least 32 characters: a shorter HMAC secret can be guessed offline",
      "secret",
    );
  }
  const plan = jwt.default_plan;
  if (
    plan !== undefined &&
    !Object.hasOwn(config.plans, plan) &&
    !invalid.names.plans.has(plan) &&
    !invalid.sections.has("plans")
  ) {
    add(path, `default_plan "${plan}" is not a plan of this file`, "default_plan");
  }
  if (jwt.claims.plan === undefined && jwt.default_plan === undefined) {
    add(path, "say which plan a token gets: claims.plan (e.g. plan), default_plan, or both");
  }
}

/**
 * The identity provider's address and fetch settings (idp/remote-jwks.ts): URLs only over https
 * (http on loopback), and the settings that only a fetch reads refused without one. Offline:
 * `--check` never fetches.
 */
function checkRemoteKeys(
  jwt: NonNullable<CheckableConfig["identity"]["jwt"]>,
  discovery: boolean,
  path: PathSegment[],
  add: Add,
) {
  if (discovery) {
    const why = unfetchableUrl(jwt.issuer!);
    if (why !== undefined) add(path, `issuer alone is fetched from (OIDC discovery): ${why}`, "issuer");
    else if (/[?#]/.test(jwt.issuer!))
      add(
        path,
        "issuer must not hold a query or fragment: the discovery document is at <issuer>/.well-known/openid-configuration",
        "issuer",
      );
  }
  if (jwt.jwks_url !== undefined) {
    const why = unfetchableUrl(jwt.jwks_url);
    if (why !== undefined) add(path, `jwks_url: ${why}`, "jwks_url");
  }
  if (!discovery && jwt.jwks_url === undefined && jwt.ca_file !== undefined) {
    add(
      path,
      "ca_file is the CA of the identity provider the keys are fetched from: give jwks_url, or issuer alone (OIDC discovery), or remove ca_file",
      "ca_file",
    );
  }
  if (jwt.refetch_interval < 1000)
    add(
      path,
      "refetch_interval must be at least 1s: it is what stops forged kids from hammering the identity provider",
      "refetch_interval",
    );
  if (jwt.fetch_timeout < 100 || jwt.fetch_timeout > 60_000)
    add(path, "fetch_timeout must be between 100ms and 60s", "fetch_timeout");
  if (jwt.cache_floor < 1000) add(path, "cache_floor must be at least 1s", "cache_floor");
  if (jwt.cache_ceiling < jwt.cache_floor)
    add(path, "cache_ceiling must not be shorter than cache_floor", "cache_ceiling");
  else if (jwt.cache_ceiling > 7 * 86_400_000)
    add(
      path,
      "cache_ceiling must be at most 7d: keys an IdP rotates must be fetched again some day",
      "cache_ceiling",
    );
  if (jwt.refetch_interval > 86_400_000) add(path, "refetch_interval must be at most 1d", "refetch_interval");
}

function checkStoreAndWorkers(config: CheckableConfig, invalid: Invalid, add: Add) {
  if (config.sustained_denial === 0) add([], "sustained_denial must be longer than 0", "sustained_denial");
  // A store that failed the schema (a typo in url, say) would only add "store needs url" here.
  if (!invalid.sections.has("store")) {
    const sources = EXACTLY_ONE.store.filter((k) => config.store[k] !== undefined);
    if (sources.length !== 1) {
      add(
        ["store"],
        sources.length === 0
          ? "store needs url (memory:// or redis://host:port), cluster or sentinel"
          : `store takes one of url, cluster and sentinel, not ${sources.join(" and ")}`,
      );
    }
    const replicas = config.store.replicas;
    if (replicas !== undefined && config.store.url?.startsWith("memory://")) {
      add(
        ["store", "replicas"],
        "store.replicas waits for Redis replicas, and memory:// has none: remove replicas, or use a Redis with replicas (store.sentinel)",
      );
    } else if (replicas !== undefined && replicas.timeout >= config.store.timeout) {
      add(
        ["store", "replicas", "timeout"],
        `the replicas' wait (${replicas.timeout}ms) must be shorter than store.timeout (${config.store.timeout}ms), which bounds the whole check with it; lower replicas.timeout or raise store.timeout`,
      );
    }
    if (config.workers !== 1 && config.store.url?.startsWith("memory://")) {
      add(
        [],
        "workers above 1 need a shared store: memory:// would give every worker its own limits",
        "workers",
      );
    }
  }
  checkJwt(config, invalid, add);
}

/** Says that a timeout of 1 s is the default, which an operator may not have written. */
const upstreamHealthDefault = (ms: number) => (ms === 1000 ? ", the default" : "");

/**
 * Each upstream in the mapping form: one of url and targets; targets that differ only by their
 * address (one scheme, one path: a request's path must not depend on which target serves it),
 * each listed once; health checks that end before the next one is due.
 */
function checkUpstreams(config: CheckableConfig, add: Add, warn: Add) {
  for (const [name, upstream] of Object.entries(config.upstreams)) {
    if (typeof upstream === "string") continue;
    const at: PathSegment[] = ["upstreams", name];
    const given = EXACTLY_ONE["upstreams.<name>"].filter((k) => upstream[k] !== undefined);
    if (given.length !== 1) {
      add(
        at,
        given.length === 0
          ? "an upstream needs url, or targets for several addresses"
          : "give url or targets, not both: list the url among the targets",
        given.length === 0 ? undefined : "url",
      );
    }
    const seen = new Map<string, number>();
    let first: URL | undefined;
    upstream.targets?.forEach((target, i) => {
      const written = typeof target === "string" ? target : target.url;
      const where: PathSegment[] =
        typeof target === "string" ? [...at, "targets", i] : [...at, "targets", i, "url"];
      const url = new URL(written);
      const path = url.pathname.replace(/\/+$/, "");
      if (first === undefined) first = url;
      else if (url.protocol !== first.protocol)
        add(
          where,
          `every target of an upstream uses one scheme: this one is ${url.protocol.slice(0, -1)}, the first ${first.protocol.slice(0, -1)}`,
        );
      else if (path !== first.pathname.replace(/\/+$/, ""))
        add(
          where,
          `every target of an upstream has the same path, which requests are sent under: this one has "${path || "/"}", the first "${first.pathname.replace(/\/+$/, "") || "/"}"`,
        );
      const twice = seen.get(url.origin);
      if (twice !== undefined)
        add(where, `${url.origin} is already target ${twice}: list it once and give it a weight instead`);
      else seen.set(url.origin, i);
    });
    checkUpstreamTls(upstream, at, first, add, warn);
    const health = upstream.health;
    if (health) {
      if (health.interval === 0) add([...at, "health"], "interval must be longer than 0", "interval");
      if (health.timeout === 0) add([...at, "health"], "timeout must be longer than 0", "timeout");
      else if (health.interval > 0 && health.timeout > health.interval)
        add(
          [...at, "health"],
          `a check's timeout (${health.timeout} ms${upstreamHealthDefault(health.timeout)}) must not be longer than the interval (${health.interval} ms) between checks`,
          "timeout",
        );
    }
  }
}

const UPSTREAM_TLS_KEYS = ["ca_file", "cert_file", "key_file", "servername", "insecure"] as const;

/**
 * TLS settings only act on https targets: on an http-only upstream they would do nothing while
 * reading as protection. A client certificate needs its key (and the key its certificate), and
 * `insecure` turns verification off, which is worth a warning every time the file is checked.
 */
function checkUpstreamTls(
  upstream: Exclude<CheckableConfig["upstreams"][string], string>,
  at: PathSegment[],
  firstTarget: URL | undefined,
  add: Add,
  warn: Add,
) {
  const scheme = URL.canParse(upstream.url ?? "")
    ? new URL(upstream.url!).protocol
    : (firstTarget?.protocol ?? "https:");
  const given = UPSTREAM_TLS_KEYS.filter((k) =>
    k === "insecure" ? upstream.insecure === true : upstream[k] !== undefined,
  );
  if (scheme !== "https:") {
    for (const k of given)
      add(at, `${k} applies to https:// targets only, and this upstream's are ${scheme.slice(0, -1)}`, k);
    return;
  }
  if ((upstream.cert_file === undefined) !== (upstream.key_file === undefined))
    add(
      at,
      upstream.cert_file === undefined
        ? "key_file needs cert_file: give the client certificate and its key together"
        : "cert_file needs key_file: give the client certificate and its key together",
      upstream.cert_file === undefined ? "key_file" : "cert_file",
    );
  if (upstream.insecure === true)
    warn(
      at,
      "insecure: true accepts any certificate from this upstream's targets, so anyone on the path can read and change its traffic; give ca_file instead",
      "insecure",
    );
}
