// What /admin/config shows: the shape of the config, never its secrets. Durations, rates and
// sizes are written as in the file (`15m`, `5/s`, `1mb`), not in the gateway's internal units.
import type { Runtime } from "../config/compile.js";
import { isNamedLimits, type PlanRouteEntry } from "../config/plan-routes.js";
import type { LimitConfig } from "../config/schema.js";
import { formatDuration, formatRate } from "../config/units.js";
import type { HeaderRules } from "../http/header-rules.js";
import { storeAddress } from "../observability/store-errors.js";
import { shownEndpoint } from "../observability/tracing.js";

export { formatRate } from "../config/units.js";

/** Bytes in the file's notation: `1mb`, `64kb`, `512b`. */
export function formatSize(bytes: number): string {
  for (const [unit, size] of [
    ["gb", 1024 ** 3],
    ["mb", 1024 ** 2],
    ["kb", 1024],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes}b`;
}

/** A limit as the file writes it: rates as `5/s`, windows and leases as `15m`. */
function describeLimit(limit: LimitConfig): Record<string, unknown> {
  const out: Record<string, unknown> = { ...limit };
  if (limit.rate !== undefined) out.rate = formatRate(limit.rate);
  if (limit.window !== undefined) out.window = formatDuration(limit.window);
  if (limit.lease !== undefined) out.lease = formatDuration(limit.lease);
  return out;
}

function describePlans(plans: Runtime["config"]["plans"]) {
  return Object.fromEntries(
    Object.entries(plans).map(([name, plan]) => [
      name,
      {
        ...(plan.global ? { global: describeLimit(plan.global) } : {}),
        ...(plan.tenant ? { tenant: describeLimit(plan.tenant) } : {}),
        routes: describeRouteEntries(plan.routes),
      },
    ]),
  );
}

/** A client's own sizes of its plan's limits (`clients[].limits`), keys as the plan's. */
function describeOverrides(limits: NonNullable<Runtime["config"]["clients"][number]["limits"]>) {
  return {
    ...(limits.global ? { global: describeLimit(limits.global) } : {}),
    routes: describeRouteEntries(limits.routes),
  };
}

/** A plan's (or a client's) routes: each one limit, or a map of named limits, as written. */
function describeRouteEntries(routes: Readonly<Record<string, PlanRouteEntry>>) {
  return Object.fromEntries(
    Object.entries(routes).map(([route, entry]) => [
      route,
      isNamedLimits(entry)
        ? Object.fromEntries(Object.entries(entry).map(([name, l]) => [name, describeLimit(l)]))
        : describeLimit(entry),
    ]),
  );
}

/** Header rules without their values: `set` (or `unset`, when a value is empty) per name. */
function describeRules(
  rules: HeaderRules,
): { set: Record<string, "set" | "unset">; remove: string[] } | null {
  if (rules.set.length === 0 && rules.remove.size === 0) return null;
  return {
    set: Object.fromEntries(rules.set.map(([name, value]) => [name, value === "" ? "unset" : "set"])),
    remove: [...rules.remove],
  };
}

/**
 * Where traces go: the endpoint without a user, password or query in it, the exporter's header names
 * with every value `set` (an authorization header is a secret).
 */
function describeTelemetry(telemetry: Runtime["config"]["telemetry"]) {
  const traces = telemetry?.traces;
  if (!traces) return { traces: null };
  return {
    traces: {
      endpoint: shownEndpoint(traces.endpoint),
      sample: traces.sample,
      service_name: traces.service_name,
      caller_ids: traces.caller_ids,
      headers: Object.fromEntries(Object.keys(traces.headers ?? {}).map((name) => [name, "set"])),
      timeout: formatDuration(traces.timeout),
    },
  };
}

/** The body of GET /admin/config. */
export function describeConfig(rt: Runtime) {
  return {
    version: rt.version,
    loaded_at: rt.loadedAt.toISOString(),
    file: rt.file,
    routes: rt.routeList.map((r, i) => ({
      name: r.name,
      path: r.matchPrefix,
      host: r.host,
      methods: r.methods ? [...r.methods] : null,
      upstream: r.upstream.name,
      by: r.by,
      cost: r.cost,
      on_failure: r.onFailure,
      max_body: r.maxBody === undefined ? null : formatSize(r.maxBody),
      // Header rules, the route's over its upstream's: names only, every value a secret.
      request_headers: describeRules(r.requestHeaders),
      response_headers: describeRules(r.responseHeaders),
      // An AI route's settings, with their defaults (docs/ai-budgets.md).
      ai: r.ai
        ? {
            format: r.ai.format,
            max_output: r.ai.maxOutput ?? null,
            clamp: r.ai.clamp,
            min_output: r.ai.minOutput,
            output_field: r.ai.outputField,
            image_tokens: r.ai.imageTokens,
          }
        : null,
      // The route's own limits as written (`total: { rate: 500/s, by: route }`), named <route>.<name>.
      limits: Object.fromEntries(
        Object.entries(rt.config.routes[i]?.limits ?? {}).map(([name, l]) => [name, describeLimit(l)]),
      ),
    })),
    plans: describePlans(rt.config.plans),
    // Money budgets' prices, dollars per million tokens, as written.
    models: rt.config.models ?? null,
    // Where alerts go, by name only: a receiver's URL and secret are secrets.
    alerts: {
      thresholds: rt.alerts.thresholds.map((t) => `${Math.round(t * 10_000) / 100}%`),
      webhooks: rt.alerts.webhooks.map((w) => ({
        name: w.label,
        events: [...w.events],
        url: "set",
        secret: "set",
        timeout: formatDuration(w.timeoutMs),
      })),
      tenants: [...rt.alerts.tenants.values()].map((t) => ({ tenant: t.id.slice(7), events: [...t.events] })),
      retry: {
        first: formatDuration(rt.alerts.retry.firstMs),
        max_delay: formatDuration(rt.alerts.retry.maxDelayMs),
        max_attempts: rt.alerts.retry.maxAttempts,
      },
      queue: rt.alerts.queueMax,
    },
    clients: rt.config.clients.map((c) => ({
      id: c.id,
      plan: c.plan,
      tenant: c.tenant ?? null,
      ...(c.limits ? { limits: describeOverrides(c.limits) } : {}),
    })),
    identity: {
      api_key_header: rt.identity.header,
      jwt: rt.identity.jwt ? { algorithms: rt.identity.jwt.algorithms } : null,
      trusted_proxies: rt.config.identity.trusted_proxies,
    },
    telemetry: describeTelemetry(rt.config.telemetry),
    store: {
      kind: rt.store.url.split(":")[0],
      address: storeAddress(rt.store),
      prefix: rt.store.prefix,
      timeout: formatDuration(rt.store.timeoutMs),
    },
  };
}
