// Validated config → the immutable runtime every request reads. Everything that does not depend
// on the request is computed here once: route table, limits per plan and route, key hashes,
// CIDR sets. A reload builds a new runtime and swaps one reference.

import { createHash } from "node:crypto";
import { globRegex, PriceTable } from "../ai/prices.js";
import type { AiSettings } from "../ai/settings.js";
import { compileAlerts } from "../alerts/settings.js";
import { mergeHeaderRules, type WrittenHeaderRules } from "../http/header-rules.js";
import { CidrSet, parseCidr } from "../identity/ip.js";
import type { JwtVerifier } from "../identity/jwt-verifier.js";
import type { CompileContext } from "../limits/algorithms/algorithm.js";
import { ALGORITHMS, DEFAULT_ALGORITHM } from "../limits/algorithms/index.js";
import { denyEverything } from "../limits/algorithms/windows.js";
import { plannedLimit } from "../limits/compiled.js";
import { type KeyBy, parseKeyBy, ROUTE_BY, scopeBy } from "../limits/key-by.js";
import type { PlannedLimit } from "../limits/plan.js";
import type { LimitSpec } from "../limits/spec.js";
import type { CompiledClient, CompiledPlan, Entitlements } from "../model/plan.js";
import type { RlsNode } from "../model/rls.js";
import type { CompiledRoute, CompiledTarget, CompiledUpstream, RouteCharge } from "../model/routes.js";
import type { CompiledRuntime } from "../model/runtime.js";
import { normalizeHostPattern } from "../routing/host.js";
import { methodSet, RouteMatcher } from "../routing/matcher.js";
import { normalizeTarget } from "../routing/normalize.js";
import { compileRewrite } from "../routing/rewrite.js";
import { DEFAULT_USAGE_FIELDS, parseUsageFields } from "../usage/fields.js";
import { compileAdminTokens } from "./admin-tokens.js";
import { type ListenerTls, listenAddress } from "./listener-tls.js";
import { isNamedLimits, type PlanRouteEntry, planRouteLimits } from "./plan-routes.js";
import type { ClientConfig, Config, LimitConfig, RouteConfig } from "./schema.js";
import type { UpstreamTls } from "./upstream-tls.js";

export type { IdentitySettings, IdentityView } from "../model/identity.js";
export type { CompiledClient, CompiledPlan, Entitlements } from "../model/plan.js";
export type {
  CompiledAi,
  CompiledRoute,
  CompiledTarget,
  CompiledUpstream,
  RouteCharge,
} from "../model/routes.js";

/** An AI route holds its request body in memory: without a max_body, at most this. */
export const AI_DEFAULT_MAX_BODY = 4 * 1024 * 1024;

/** The compiled config, its `config` the file as the schema parsed it (model/runtime.ts). */
export type Runtime = CompiledRuntime<Config>;

export const ANONYMOUS_PLAN = "anonymous";

/** Limits compiled without a config (the library): calendar windows in UTC. */
export const DEFAULT_COMPILE_CONTEXT: CompileContext = { tz: "UTC" };

/** A route's `charge` and `usage_fields`, which the schema already checked. */
function compileCharge(
  written: RouteConfig["charge"],
  usageFields: RouteConfig["usage_fields"],
): RouteCharge {
  const sources = Array.isArray(written) ? written : [written];
  if (!sources.includes("usage")) return { header: sources.includes("header"), usage: null };
  const fields = usageFields === undefined ? { fields: DEFAULT_USAGE_FIELDS } : parseUsageFields(usageFields);
  if ("error" in fields) throw new Error(`usage_fields passed validation with an error: ${fields.error}`);
  return { header: sources.includes("header"), usage: fields.fields };
}

/**
 * Whether any limit is a token budget (`unit: tokens`): then what upstreams report debits only
 * those, and limits that count requests keep taking the route's cost. Entries that failed the
 * schema (the checks run on the rest of a file) are skipped.
 */
export function hasTokenBudgets(config: {
  plans: Config["plans"];
  routes: readonly (RouteConfig | undefined)[];
  clients: readonly (ClientConfig | undefined)[];
}): boolean {
  const isBudget = (l: LimitConfig | undefined) => l?.unit === "tokens";
  const anyBudget = (limits: Record<string, LimitConfig> | undefined) =>
    limits !== undefined && Object.values(limits).some(isBudget);
  const anyRouteBudget = (routes: Record<string, PlanRouteEntry> | undefined) =>
    routes !== undefined && planRouteLimits(routes).some((l) => isBudget(l.limit));
  for (const plan of Object.values(config.plans)) {
    if (plan && (isBudget(plan.global) || isBudget(plan.tenant) || anyRouteBudget(plan.routes))) return true;
  }
  return (
    config.routes.some((r) => anyBudget(r?.limits)) ||
    config.clients.some((c) => isBudget(c?.limits?.global) || anyRouteBudget(c?.limits?.routes))
  );
}

/**
 * A limit's spec, compiled by its algorithm; null for `unlimited: true`. `limit: 0` denies every
 * request whatever the algorithm.
 */
export function compileLimit(
  name: string,
  limit: LimitConfig,
  context: CompileContext = DEFAULT_COMPILE_CONTEXT,
): LimitSpec | null {
  if (limit.unlimited) return null;
  // A money budget is written in dollars and counted in micro-dollars.
  const counted = limit.unit === "usd" ? inMicroDollars(limit) : limit;
  const spec =
    counted.limit === 0
      ? denyEverything(name, counted.window, context.tz)
      : ALGORITHMS[counted.algorithm ?? DEFAULT_ALGORITHM].config.compile(name, counted, context);
  const budget = limit.unit === "tokens" || limit.unit === "usd";
  const unit = budget ? { unit: limit.unit as "tokens" | "usd" } : {};
  return limit.shadow ? { ...spec, ...unit, shadow: true } : budget ? { ...spec, ...unit } : spec;
}

/** A money budget's amounts (limit, burst, a rate's count), from dollars to micro-dollars. */
function inMicroDollars(limit: LimitConfig): LimitConfig {
  const micros = (dollars: number) => Math.round(dollars * 1_000_000);
  return {
    ...limit,
    ...(limit.limit === undefined ? {} : { limit: micros(limit.limit) }),
    ...(limit.burst === undefined ? {} : { burst: micros(limit.burst) }),
    ...(limit.rate === undefined ? {} : { rate: { ...limit.rate, count: micros(limit.rate.count) } }),
  };
}

/** An upstream's header rules of one direction (the short form has none). */
function upstreamRules(
  value: Config["upstreams"][string] | undefined,
  direction: "request" | "response",
): WrittenHeaderRules | undefined {
  if (value === undefined || typeof value === "string") return undefined;
  return direction === "request" ? value.request_headers : value.response_headers;
}

/** A route's `ai`, with its defaults; undefined for a route without one. */
function compileAi(ai: RouteConfig["ai"]): AiSettings | undefined {
  if (ai === undefined) return undefined;
  return {
    format: ai.format,
    maxOutput: ai.max_output,
    clamp: ai.clamp,
    minOutput: ai.min_output,
    outputField: ai.output_field ?? "max_completion_tokens",
    imageTokens: ai.image_tokens,
    referencedInputTokens: ai.referenced_input_tokens,
  };
}

const UPSTREAM_DEFAULTS = { timeout: 30_000, connect_timeout: 2000, connections: 128, caller_share: 0.25 };

/** An upstream's settings with the short form's defaults filled in. */
function longUpstream(value: Config["upstreams"][string]) {
  return typeof value === "string" ? { url: value, ...UPSTREAM_DEFAULTS } : value;
}

/** A connect timeout as a length: 0 is none, longer than any other. */
const connectLength = (ms: number) => (ms === 0 ? Number.POSITIVE_INFINITY : ms);

/**
 * Each upstream's pool connect timeout: the longest its routes and itself ask for (0 if any asks
 * for none). undici sets it per pool, so the pool must allow the longest; shorter ones are timed
 * per request (CompiledRoute.connectWaitMs).
 */
function poolConnectTimeouts(config: Config): Map<string, number> {
  const longest = new Map<string, number>();
  for (const [name, value] of Object.entries(config.upstreams))
    longest.set(name, longUpstream(value).connect_timeout);
  for (const route of config.routes) {
    const current = longest.get(route.upstream);
    if (current === undefined || route.connect_timeout === undefined) continue;
    if (connectLength(route.connect_timeout) > connectLength(current))
      longest.set(route.upstream, route.connect_timeout);
  }
  return longest;
}

function compileUpstream(
  name: string,
  value: Config["upstreams"][string],
  poolConnectTimeout: number,
  tls: UpstreamTls | undefined,
): CompiledUpstream {
  const long = longUpstream(value);
  const written = writtenTargets(value);
  const url = new URL(written[0]!.url);
  const basePath = url.pathname.replace(/\/+$/, "");
  const targets = written.map((t): CompiledTarget => {
    const at = new URL(t.url);
    return {
      origin: at.origin,
      host: at.host,
      weight: t.weight,
      // The TLS files' hash: a reload with a new CA or client certificate builds new pools.
      key: JSON.stringify([
        at.origin,
        poolConnectTimeout,
        long.connections,
        tls?.hash ?? null,
        tls?.servername ?? null,
        tls?.rejectUnauthorized ?? true,
      ]),
    };
  });
  const health =
    typeof value === "string" || value.health === undefined
      ? undefined
      : { path: value.health.path, intervalMs: value.health.interval, timeoutMs: value.health.timeout };
  return {
    name,
    origin: url.origin,
    basePath,
    host: url.host,
    timeoutMs: long.timeout,
    connectTimeoutMs: poolConnectTimeout,
    connections: long.connections,
    capacity: long.connections * targets.length,
    callerShare: Math.max(1, Math.floor(long.caller_share * long.connections * targets.length)),
    targets,
    health,
    retries: typeof value === "string" ? 0 : value.retries,
    tls,
    poolKey: JSON.stringify([targets.map((t) => [t.key, t.weight]), health]),
  };
}

/**
 * The TLS the loader read for an upstream. One whose files were not read (a caller that compiled
 * without passing them) is an error, never a pool that quietly goes without its CA or client
 * certificate.
 */
function upstreamTlsOf(
  name: string,
  value: Config["upstreams"][string],
  loaded: Readonly<Record<string, UpstreamTls>> | undefined,
): UpstreamTls | undefined {
  const tls = loaded?.[name];
  if (
    !tls &&
    typeof value !== "string" &&
    (value.ca_file !== undefined ||
      value.cert_file !== undefined ||
      value.servername !== undefined ||
      value.insecure)
  )
    throw new Error(`upstream ${name}: its TLS settings were not loaded`);
  return tls;
}

/** An upstream's targets as written: `targets`, else its one `url` (checks.ts: exactly one). */
export function writtenTargets(value: Config["upstreams"][string]): { url: string; weight: number }[] {
  if (typeof value === "string") return [{ url: value, weight: 1 }];
  if (value.targets) return value.targets.map((t) => (typeof t === "string" ? { url: t, weight: 1 } : t));
  return [{ url: value.url!, weight: 1 }];
}

/** A route's timeouts: its own, else its upstream's (see CompiledRoute). */
function routeTimeouts(
  route: Config["routes"][number],
  upstream: CompiledUpstream,
  written: ReturnType<typeof longUpstream>,
): Pick<CompiledRoute, "timeoutMs" | "connectTimeoutMs" | "connectWaitMs"> {
  const connectTimeoutMs = route.connect_timeout ?? written.connect_timeout;
  return {
    timeoutMs: route.timeout ?? upstream.timeoutMs,
    connectTimeoutMs,
    connectWaitMs:
      connectLength(connectTimeoutMs) < connectLength(upstream.connectTimeoutMs)
        ? connectTimeoutMs
        : undefined,
  };
}

/**
 * One plan's limits per route name. A list is built the first time a route asks for it and kept,
 * so the same (plan, route) always gets the same list (the limiter keys caches on it) while a
 * config of P plans and R routes compiles in O(P + R), not O(P × R).
 */
class RouteLimits implements ReadonlyMap<string, readonly PlannedLimit[]> {
  private readonly built = new Map<string, readonly PlannedLimit[]>();

  constructor(
    private readonly routes: ReadonlyMap<string, CompiledRoute>,
    private readonly shared: readonly PlannedLimit[],
    private readonly own: ReadonlyMap<string, readonly PlannedLimit[]>,
  ) {}

  /** The plan's global and tenant limits, its entry (or entries) for the route, then the route's own limits. */
  get(name: string): readonly PlannedLimit[] | undefined {
    const built = this.built.get(name);
    if (built !== undefined) return built;
    const route = this.routes.get(name);
    if (!route) return undefined;
    const own = this.own.get(name);
    const limits = own ? [...this.shared, ...own, ...route.limits] : [...this.shared, ...route.limits];
    this.built.set(name, limits);
    return limits;
  }

  has(name: string): boolean {
    return this.routes.has(name);
  }

  get size(): number {
    return this.routes.size;
  }

  keys(): MapIterator<string> {
    return this.routes.keys();
  }

  values(): MapIterator<readonly PlannedLimit[]> {
    return this.all().values();
  }

  entries(): MapIterator<[string, readonly PlannedLimit[]]> {
    return this.all().entries();
  }

  [Symbol.iterator](): MapIterator<[string, readonly PlannedLimit[]]> {
    return this.entries();
  }

  forEach(
    callback: (
      value: readonly PlannedLimit[],
      key: string,
      map: ReadonlyMap<string, readonly PlannedLimit[]>,
    ) => void,
    thisArg?: unknown,
  ): void {
    for (const [key, value] of this.all()) callback.call(thisArg, value, key, this);
  }

  /** Every route's list, in route order. */
  private all(): Map<string, readonly PlannedLimit[]> {
    const out = new Map<string, readonly PlannedLimit[]>();
    for (const name of this.routes.keys()) out.set(name, this.get(name)!);
    return out;
  }
}

type PlanConfig = Config["plans"][string];

/** One plan's limits, compiled once: each route's list is built on first use (RouteLimits). */
function compilePlan(
  planName: string,
  plan: PlanConfig,
  routesByName: ReadonlyMap<string, CompiledRoute>,
  fraction: number,
  context: CompileContext,
): CompiledPlan {
  const global = plan.global ? compileLimit(`${planName}.global`, plan.global, context) : null;
  const tenant = plan.tenant ? compileLimit(`${planName}.tenant`, plan.tenant, context) : null;
  const shared: PlannedLimit[] = [];
  const planned = (spec: LimitSpec, by: KeyBy, tenantOnly: boolean, written: LimitConfig): PlannedLimit =>
    plannedLimit(spec, fraction, by, tenantOnly, written);
  if (global)
    shared.push(planned(global, compiledBy(plan.global!.by, scopeBy("caller")), false, plan.global!));
  if (tenant)
    shared.push(planned(tenant, compiledBy(plan.tenant!.by, scopeBy("tenant")), true, plan.tenant!));
  // Each route's own limits: one, or each of its map of named limits, in the order written.
  const own = new Map<string, PlannedLimit[]>();
  for (const { route: routeName, suffix, limit } of planRouteLimits(plan.routes)) {
    const route = routesByName.get(routeName);
    const spec = route ? compileLimit(`${planName}.${suffix}`, limit, context) : null;
    if (!route || !spec) continue;
    const list = own.get(routeName) ?? [];
    list.push(planned(spec, compiledBy(limit.by, scopeBy(route.by)), false, limit));
    own.set(routeName, list);
  }
  return {
    name: planName,
    allow: compileAllow(plan.allow),
    limitsByRoute: new RouteLimits(routesByName, shared, own),
    limits: [...shared, ...[...own.values()].flat()],
  };
}

function compileAllow(allow: PlanConfig["allow"]): Entitlements | undefined {
  if (!allow || (allow.routes === undefined && allow.models === undefined)) return undefined;
  const patterns = allow.models?.map((m) => (m.includes("*") ? globRegex(m) : m));
  return {
    routes: allow.routes ? new Set(allow.routes) : undefined,
    models: allow.models
      ? {
          written: allow.models,
          includes: (model) => patterns!.some((p) => (typeof p === "string" ? p === model : p.test(model))),
        }
      : undefined,
  };
}

/**
 * A client's plan with its `limits` in place of the plan's limits of the same keys. Compiled
 * under the plan's name, the limits keep the plan's names (`pro.global`), so the client's state
 * keys, headers and metrics are those it had without the override; only the sizes differ. Each
 * key exists in the plan and `tenant` is refused (checks.ts): the tenant limit is one state
 * shared by the tenant's clients, which one client's sizes would make them disagree on.
 */
function overridden(plan: PlanConfig, limits: NonNullable<ClientConfig["limits"]>): PlanConfig {
  // An override sizes a limit; how it is keyed stays the plan's (checks.ts refuses a `by` here).
  const keyedAs = (size: LimitConfig, of: LimitConfig | undefined): LimitConfig =>
    of?.by === undefined ? size : { ...size, by: of.by };
  const routes: Record<string, PlanRouteEntry> = { ...plan.routes };
  for (const [name, entry] of Object.entries(limits.routes)) {
    const planned = plan.routes[name];
    // A map replaces the plan's limits of the names it gives and keeps the others.
    if (isNamedLimits(entry) && isNamedLimits(planned)) {
      const merged: Record<string, LimitConfig> = { ...planned };
      for (const [limitName, size] of Object.entries(entry))
        merged[limitName] = keyedAs(size, planned[limitName]);
      routes[name] = merged;
    } else if (!isNamedLimits(entry) && !isNamedLimits(planned)) {
      routes[name] = keyedAs(entry, planned);
    }
    // One form against the other is refused by checks.ts.
  }
  return {
    ...plan,
    ...(limits.global ? { global: keyedAs(limits.global, plan.global) } : {}),
    routes,
  };
}

/**
 * A plan with one client's `limits` in place, compiled against a running config: what the YAML's
 * clients get from compileRuntime, for a key issued at runtime (operator-state/api-keys.ts). The caller has
 * checked the limits against this config (operator-state/api-key-spec.ts), as checks.ts does for the YAML.
 */
export function compileClientPlan(
  rt: Runtime,
  planName: string,
  limits: NonNullable<ClientConfig["limits"]>,
): CompiledPlan {
  const routesByName = new Map<string, CompiledRoute>();
  for (const route of rt.routeList) if (!routesByName.has(route.name)) routesByName.set(route.name, route);
  const plan = rt.config.plans[planName];
  if (!plan) throw new Error(`plan "${planName}" is not in the running config`);
  return compilePlan(planName, overridden(plan, limits), routesByName, rt.config.store.local_fraction, {
    tz: rt.config.calendar.tz,
  });
}

/** A limit's written `by`, compiled (the schema has checked it), or its default. */
function compiledBy(written: LimitConfig["by"], fallback: KeyBy): KeyBy {
  if (written === undefined) return fallback;
  const by = parseKeyBy(written);
  if ("error" in by) throw new Error(`a by passed validation and then failed: ${by.error}`);
  return by;
}

/** A route's own limits (`routes[].limits`), named `<route>.<name>`, keyed by route by default. */
function compileRouteLimits(
  routeName: string,
  limits: Config["routes"][number]["limits"],
  fraction: number,
  context: CompileContext,
): PlannedLimit[] {
  const out: PlannedLimit[] = [];
  for (const [name, limit] of Object.entries(limits)) {
    const spec = compileLimit(`${routeName}.${name}`, limit, context);
    if (spec) out.push(plannedLimit(spec, fraction, compiledBy(limit.by, ROUTE_BY), false, limit));
  }
  return out;
}

/**
 * The header and query parameter names any limit may key a route's requests by: the plans'
 * global and tenant limits (every route's), their entries for the route, the route's own.
 */
function keyedNames(
  config: Config,
): (route: Config["routes"][number]) => { headers: string[]; query: string[] } {
  const everywhere = { headers: new Set<string>(), query: new Set<string>() };
  const perRoute = new Map<string, { headers: Set<string>; query: Set<string> }>();
  const collect = (written: LimitConfig["by"], into: { headers: Set<string>; query: Set<string> }) => {
    if (written === undefined) return;
    const by = parseKeyBy(written);
    if ("error" in by) return;
    for (const part of by.parts) {
      if (part.kind === "header") into.headers.add(part.name);
      if (part.kind === "query") into.query.add(part.name);
    }
  };
  const routeSets = (name: string) => {
    let sets = perRoute.get(name);
    if (!sets) {
      sets = { headers: new Set(), query: new Set() };
      perRoute.set(name, sets);
    }
    return sets;
  };
  for (const plan of Object.values(config.plans)) {
    collect(plan.global?.by, everywhere);
    collect(plan.tenant?.by, everywhere);
    for (const { route: routeName, limit } of planRouteLimits(plan.routes))
      collect(limit.by, routeSets(routeName));
  }
  for (const route of config.routes)
    for (const limit of Object.values(route.limits)) collect(limit.by, routeSets(route.name));
  return (route) => {
    const own = perRoute.get(route.name);
    return {
      headers: [...new Set([...everywhere.headers, ...(own?.headers ?? [])])],
      query: [...new Set([...everywhere.query, ...(own?.query ?? [])])],
    };
  };
}

function cidrSet(list: readonly string[]): CidrSet {
  return new CidrSet(list.map((text) => parseCidr(text)!));
}

export function compileRuntime(
  config: Config,
  meta: {
    file: string;
    version: string;
    jwt?: JwtVerifier | undefined;
    keyFile?: string | undefined;
    tls?: ListenerTls | undefined;
    /** From the loader (load.ts): an upstream that names TLS files and lacks them here is refused. */
    upstreamTls?: Readonly<Record<string, UpstreamTls>> | undefined;
    /** From the loader: the rls config files, resolved and compiled (rls-config.ts). */
    rls?: { files: readonly string[]; domains: ReadonlyMap<string, RlsNode> } | undefined;
  },
): Runtime {
  const poolConnect = poolConnectTimeouts(config);
  const upstreams = new Map(
    Object.entries(config.upstreams).map(([name, u]) => [
      name,
      compileUpstream(name, u, poolConnect.get(name)!, upstreamTlsOf(name, u, meta.upstreamTls)),
    ]),
  );
  const fraction = config.store.local_fraction;
  const context: CompileContext = { tz: config.calendar.tz };
  const keyed = keyedNames(config);
  const routeList: CompiledRoute[] = config.routes.map((r) => {
    const normalized = normalizeTarget(r.match.path);
    if (!normalized.ok) throw new Error(`route ${r.name} passed validation with a bad path`);
    const reads = keyed(r);
    const upstream = upstreams.get(r.upstream)!;
    return {
      name: r.name,
      matchPrefix: normalized.matchPath,
      methods: methodSet(r.match.methods),
      host: r.match.host === undefined ? null : normalizeHostPattern(r.match.host),
      upstream,
      retries: r.retries ?? upstream.retries,
      by: r.by ?? "caller",
      limits: compileRouteLimits(r.name, r.limits, fraction, context),
      keyedHeaders: reads.headers,
      keyedQuery: reads.query,
      trustedHeaders: r.trusted_headers.map((h) => h.toLowerCase()),
      cost: r.cost,
      onFailure: r.on_failure ?? config.store.on_failure,
      maxBody: r.max_body ?? (r.ai ? AI_DEFAULT_MAX_BODY : undefined),
      hideCredentials: r.hide_credentials,
      ...routeTimeouts(r, upstream, longUpstream(config.upstreams[r.upstream]!)),
      rewrite: compileRewrite(normalized.matchPath, r.strip_prefix, r.rewrite?.prefix),
      maxCost: r.max_cost,
      charge: compileCharge(r.charge, r.usage_fields),
      ai: compileAi(r.ai),
      requestHeaders: mergeHeaderRules(
        upstreamRules(config.upstreams[r.upstream], "request"),
        r.request_headers,
      ),
      responseHeaders: mergeHeaderRules(
        upstreamRules(config.upstreams[r.upstream], "response"),
        r.response_headers,
      ),
    };
  });

  const routesByName = new Map<string, CompiledRoute>();
  for (const route of routeList) if (!routesByName.has(route.name)) routesByName.set(route.name, route);
  const plans = new Map<string, CompiledPlan>();
  for (const [planName, plan] of Object.entries(config.plans))
    plans.set(planName, compilePlan(planName, plan, routesByName, fraction, context));

  const clientsByKeyHash = new Map<string, CompiledClient>();
  for (const c of config.clients) {
    const hash = c.key_sha256?.toLowerCase() ?? createHash("sha256").update(c.key!).digest("hex");
    const plan = c.limits
      ? compilePlan(c.plan, overridden(config.plans[c.plan]!, c.limits), routesByName, fraction, context)
      : plans.get(c.plan)!;
    clientsByKeyHash.set(hash, { id: c.id, plan, tenant: c.tenant });
  }

  return Object.freeze({
    config,
    file: meta.file,
    keyFile: meta.keyFile,
    listen: { address: listenAddress(config.listen), tls: meta.tls },
    version: meta.version,
    loadedAt: new Date(),
    routes: new RouteMatcher(routeList),
    routeList,
    upstreams,
    plans,
    anonymousPlan: plans.get(ANONYMOUS_PLAN),
    clientsByKeyHash,
    identity: {
      header: config.identity.api_key.header.toLowerCase(),
      bearer: config.identity.api_key.bearer,
      onUnknown: config.identity.api_key.on_unknown,
      trustedProxies: cidrSet(config.identity.trusted_proxies),
      clientIpHeader: config.identity.client_ip_header,
      ipv6Prefix: config.identity.ipv6_prefix,
      jwt: meta.jwt,
      jwtDefaultPlan: config.identity.jwt?.default_plan,
      authFailures:
        config.identity.auth_failures === false
          ? undefined
          : { limit: config.identity.auth_failures.limit, windowMs: config.identity.auth_failures.window },
    },
    deny: { ips: cidrSet(config.deny.ips), clients: new Set(config.deny.clients) },
    exempt: { ips: cidrSet(config.exempt.ips), clients: new Set(config.exempt.clients) },
    headerStyles: {
      draft: config.headers.includes("draft"),
      ietf: config.headers.includes("ietf"),
      legacy: config.headers.includes("legacy"),
    },
    tokenBudgets: hasTokenBudgets(config),
    prices: config.models === undefined ? undefined : new PriceTable(config.models),
    retryHintMaxMs: config.retry_hint_max,
    alerts: compileAlerts(config.alerts, config.tenants, config.calendar.alert_at),
    admin: { tokens: compileAdminTokens(config.admin), auditRetentionMs: config.admin.audit_retention },
    rls:
      config.rls === undefined || meta.rls === undefined
        ? undefined
        : {
            listen: config.rls.listen,
            files: meta.rls.files,
            domains: meta.rls.domains,
            responseHeaders: config.rls.response_headers,
            onFailure: config.rls.on_failure ?? config.store.on_failure,
          },
    store: {
      url: config.store.url ?? (config.store.cluster ? "redis-cluster://" : "redis-sentinel://"),
      cluster: config.store.cluster,
      sentinel: config.store.sentinel,
      prefix: config.store.prefix,
      timeoutMs: config.store.timeout,
      replicas:
        config.store.replicas === undefined
          ? undefined
          : { wait: config.store.replicas.wait, timeoutMs: config.store.replicas.timeout },
    },
  });
}
