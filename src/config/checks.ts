// Checks the schema cannot express: names that must refer to each other, duplicates, limits that
// are impossible to satisfy, and features this version does not build yet. Each problem points
// at the node to fix.
import { parseCidr } from "../identity/ip.js";
import { normalizeTarget } from "../routing/normalize.js";
import type { PathSegment } from "./document.js";
import { suggest } from "./problems.js";
import type { Config, LimitConfig } from "./schema.js";

export interface PathProblem {
  path: PathSegment[];
  message: string;
  /** Point at this key of the map at `path` rather than at the map. */
  atKey?: string;
}

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

export function checkConfig(config: Config): PathProblem[] {
  const problems: PathProblem[] = [];
  const add = (path: PathSegment[], message: string, atKey?: string) =>
    problems.push(atKey === undefined ? { path, message } : { path, message, atKey });
  const didYouMean = hints();

  checkNotYetSupported(config, add);

  const upstreamNames = Object.keys(config.upstreams);
  if (upstreamNames.length === 0) add(["upstreams"], "at least one upstream is needed");

  const routeNames = new Set<string>();
  const routeTargets = new Map<string, string>();
  config.routes.forEach((route, i) => {
    if (routeNames.has(route.name)) add(["routes", i, "name"], `duplicate route name "${route.name}"`);
    routeNames.add(route.name);
    if (!config.upstreams[route.upstream]) {
      add(
        ["routes", i, "upstream"],
        `unknown upstream "${route.upstream}"${didYouMean(route.upstream, upstreamNames)}`,
      );
    }
    const normalized = normalizeTarget(route.match.path);
    if (!normalized.ok || normalized.query) {
      add(
        ["routes", i, "match", "path"],
        `"${route.match.path}" is not a plain path (${normalized.ok ? "it has a query" : normalized.reason})`,
      );
      return;
    }
    const methods = route.match.methods?.map((m) => m.toUpperCase()).sort() ?? ["*"];
    for (const method of methods) {
      const target = `${method} ${normalized.matchPath}`;
      const previous = routeTargets.get(target);
      if (previous)
        add(
          ["routes", i, "match"],
          `matches the same requests as route "${previous}", so one of them can never apply`,
        );
      routeTargets.set(target, route.name);
    }
  });

  const planNames = Object.keys(config.plans);
  const routeNameList = [...routeNames];
  const routeCosts = routesByCost(config);
  for (const [planName, plan] of Object.entries(config.plans)) {
    if (plan.global) checkLimit(["plans", planName, "global"], plan.global, add);
    if (plan.tenant) checkLimit(["plans", planName, "tenant"], plan.tenant, add);
    for (const [routeName, limit] of Object.entries(plan.routes)) {
      if (!routeNames.has(routeName)) {
        add(
          ["plans", planName, "routes"],
          `unknown route "${routeName}"${didYouMean(routeName, routeNameList)}`,
          routeName,
        );
        continue;
      }
      checkLimit(["plans", planName, "routes", routeName], limit, add);
    }
    // A route whose cost exceeds a bucket's burst could never be admitted: that is a config bug.
    // Each limit is compared with the costliest routes only (routes sorted by cost once), so
    // many plans times many routes stays linear.
    for (const key of ["global", "tenant"] as const) {
      const burst = burstOf(plan[key]);
      if (burst === undefined) continue;
      const { costliest, count } = routeCosts.over(burst);
      if (!costliest) continue;
      const more = count > 1 ? ` (and ${count - 1} more route${count > 2 ? "s" : ""})` : "";
      add(
        ["plans", planName, key],
        `route "${costliest.name}" costs ${costliest.cost}, more than this limit's ${burst}: it could never be admitted${more}`,
      );
    }
    for (const [routeName, limit] of Object.entries(plan.routes)) {
      const burst = burstOf(limit);
      const cost = routeCosts.cost.get(routeName);
      if (burst !== undefined && cost !== undefined && cost > burst) {
        add(
          ["plans", planName, "routes", routeName],
          `route "${routeName}" costs ${cost}, more than this limit's ${burst}: it could never be admitted`,
        );
      }
    }
  }

  const clientIds = new Set<string>();
  const keys = new Set<string>();
  config.clients.forEach((client, i) => {
    if (clientIds.has(client.id)) add(["clients", i, "id"], `duplicate client id "${client.id}"`);
    clientIds.add(client.id);
    if ((client.key === undefined) === (client.key_sha256 === undefined)) {
      add(["clients", i], "give exactly one of key_sha256 (recommended) or key");
    }
    const keyId = client.key_sha256?.toLowerCase() ?? `plain:${client.key}`;
    if (keys.has(keyId)) add(["clients", i], "another client has the same key");
    keys.add(keyId);
    if (!config.plans[client.plan]) {
      add(["clients", i, "plan"], `unknown plan "${client.plan}"${didYouMean(client.plan, planNames)}`);
    }
  });

  const clientIdList = [...clientIds];
  const checkCidrs = (path: PathSegment[], list: readonly string[]) =>
    list.forEach((text, i) => {
      if (!parseCidr(text))
        add([...path, i], `"${text}" is not an IP address or CIDR such as 10.0.0.0/8 or ::1/128`);
    });
  checkCidrs(["identity", "trusted_proxies"], config.identity.trusted_proxies);
  for (const list of ["deny", "exempt"] as const) {
    checkCidrs([list, "ips"], config[list].ips);
    config[list].clients.forEach((id, i) => {
      if (!clientIds.has(id))
        add([list, "clients", i], `unknown client "${id}"${didYouMean(id, clientIdList)}`);
    });
  }
  return problems;
}

/** The capacity a route's cost is compared with: a bucket's burst or a window's limit. */
function burstOf(limit: LimitConfig | undefined): number | undefined {
  const burst = limit && !limit.unlimited ? (limit.burst ?? limit.limit) : undefined;
  return burst !== undefined && burst > 0 ? burst : undefined;
}

/** Routes by cost, costliest first, to find those above a capacity without visiting the rest. */
function routesByCost(config: Config) {
  const sorted = config.routes
    .map((r, i) => ({ name: r.name, cost: r.cost, i }))
    .sort((a, b) => b.cost - a.cost || a.i - b.i);
  const cost = new Map<string, number>();
  for (const r of config.routes) if (!cost.has(r.name)) cost.set(r.name, r.cost);
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

export function checkLimit(
  path: PathSegment[],
  limit: LimitConfig,
  add: (p: PathSegment[], m: string, k?: string) => void,
) {
  const algorithm = limit.algorithm ?? "token_bucket";
  if (limit.unlimited !== undefined) {
    const others = Object.keys(limit).filter((k) => k !== "unlimited");
    if (limit.unlimited !== true)
      add(path, "unlimited can only be true; remove it to limit this scope", "unlimited");
    else if (others.length)
      add(path, `unlimited: true cannot be combined with ${others.join(", ")}`, others[0]);
    return;
  }
  if (
    algorithm === "fixed_window" ||
    algorithm === "sliding_window" ||
    algorithm === "sliding_window_counter"
  ) {
    for (const key of ["rate", "burst", "batch", "max_in_flight", "lease", "queue"] as const) {
      if (limit[key] !== undefined)
        add(path, `${key} does not apply to ${algorithm} (it takes limit + window)`, key);
    }
    if (limit.limit === undefined) add(path, "limit is missing (e.g. limit: 5)");
    // limit: 0 denies everything, whatever the window; it needs none.
    if (limit.window === undefined && limit.limit !== 0) add(path, "window is missing (e.g. window: 15m)");
    else if (limit.window === 0) add(path, "window must be longer than 0", "window");
    return;
  }
  if (algorithm === "leaky_bucket") {
    refuseKeys(
      path,
      limit,
      ["burst", "limit", "window", "max_in_flight", "lease", "batch"],
      "a leaky bucket (it takes rate + queue)",
      add,
    );
    if (limit.rate === undefined) add(path, "rate is missing: how fast the queue drains (e.g. rate: 10/s)");
    else if (limit.rate.count <= 0) add(path, "rate must be more than 0", "rate");
    if (limit.queue === undefined) add(path, "queue is missing: how many requests may wait (e.g. queue: 50)");
    return;
  }
  if (algorithm === "concurrency") {
    refuseKeys(
      path,
      limit,
      ["rate", "burst", "limit", "window", "queue", "batch"],
      "a concurrency limit (it takes max_in_flight and lease)",
      add,
    );
    if (limit.max_in_flight === undefined) add(path, "max_in_flight is missing (e.g. max_in_flight: 2)");
    if (limit.lease === 0) add(path, "lease must be longer than 0 (e.g. lease: 60s)", "lease");
    return;
  }
  refuseKeys(path, limit, ["max_in_flight", "lease", "queue"], "a token bucket", add);
  const capacity = limit.burst ?? limit.limit;
  if (limit.batch !== undefined && limit.batch < 2)
    add(path, "batch must be at least 2 (1 is no batching)", "batch");
  else if (limit.batch !== undefined && capacity !== undefined && limit.batch > capacity) {
    add(path, `batch ${limit.batch} is more than the bucket holds (${capacity})`, "batch");
  }
  const rateForm = limit.rate !== undefined || limit.burst !== undefined;
  const windowForm = limit.limit !== undefined || limit.window !== undefined;
  if (rateForm && windowForm) {
    add(path, "a token bucket takes either rate + burst or limit + window, not both");
  } else if (rateForm) {
    if (limit.rate === undefined) add(path, "rate is missing (e.g. rate: 5/s)");
    if (limit.burst === undefined) add(path, "burst is missing (e.g. burst: 10)");
    if (limit.rate && limit.rate.count <= 0) add(path, "rate must be more than 0", "rate");
    if (limit.burst === 0) add(path, "burst must be at least 1", "burst");
  } else if (windowForm) {
    if (limit.limit === undefined) add(path, "limit is missing (e.g. limit: 100)");
    if (limit.window === undefined && limit.limit !== 0) add(path, "window is missing (e.g. window: 1h)");
    if (limit.window === 0) add(path, "window must be longer than 0", "window");
  } else {
    add(
      path,
      "a token bucket needs rate + burst (e.g. rate: 5/s, burst: 10) or limit + window (e.g. limit: 100, window: 1h)",
    );
  }
}

function refuseKeys(
  path: PathSegment[],
  limit: LimitConfig,
  keys: readonly (keyof LimitConfig)[],
  what: string,
  add: (p: PathSegment[], m: string, k?: string) => void,
) {
  for (const key of keys) if (limit[key] !== undefined) add(path, `${key} does not apply to ${what}`, key);
}

function checkJwt(config: Config, add: (p: PathSegment[], m: string, k?: string) => void) {
  const jwt = config.identity.jwt;
  if (!jwt) return;
  const path: PathSegment[] = ["identity", "jwt"];
  const sources = (["secret", "public_key_file", "jwks_file"] as const).filter((k) => jwt[k] !== undefined);
  if (sources.length !== 1) {
    add(
      path,
      sources.length === 0
        ? "jwt needs a key: exactly one of secret, public_key_file or jwks_file"
        : `jwt takes exactly one of secret, public_key_file or jwks_file, not ${sources.join(" and ")}`,
    );
  }
  if (jwt.secret !== undefined && jwt.secret.length < 32) {
    add(
      path,
      "secret must be at least 32 characters: a shorter HMAC secret can be guessed offline",
      "secret",
    );
  }
  if (jwt.default_plan !== undefined && !(jwt.default_plan in config.plans)) {
    add(path, `default_plan "${jwt.default_plan}" is not a plan of this file`, "default_plan");
  }
  if (jwt.claims.plan === undefined && jwt.default_plan === undefined) {
    add(path, "say which plan a token gets: claims.plan (e.g. plan), default_plan, or both");
  }
}

function checkNotYetSupported(config: Config, add: (p: PathSegment[], m: string, k?: string) => void) {
  if (config.sustained_denial === 0) add([], "sustained_denial must be longer than 0", "sustained_denial");
  const sources = (["url", "cluster", "sentinel"] as const).filter((k) => config.store[k] !== undefined);
  if (sources.length !== 1) {
    add(
      ["store"],
      sources.length === 0
        ? "store needs url (memory:// or redis://host:port), cluster or sentinel"
        : `store takes one of url, cluster and sentinel, not ${sources.join(" and ")}`,
    );
  }
  if (config.workers !== 1 && config.store.url?.startsWith("memory://")) {
    add(
      [],
      "workers above 1 need a shared store: memory:// would give every worker its own limits",
      "workers",
    );
  }
  checkJwt(config, add);
}
