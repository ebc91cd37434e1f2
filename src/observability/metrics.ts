// Prometheus metrics (prom-client). No label ever carries a client id, key or IP: those are
// unbounded and, for keys, secret. Route names and decisions are bounded by the config.
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { LeanHistogram, type LeanHistogramChild } from "./lean-histogram.js";

export type RequestDecision =
  | "allowed"
  | "limited"
  | "exempt"
  | "degraded_open"
  | "degraded_closed"
  | "degraded_local"
  | "bad_request"
  | "unauthorized"
  | "caller_denied"
  | "not_entitled"
  | "no_route"
  | "internal_error"
  | "shadow_limited"
  | "auth_throttled";

/** Why a charge: usage response was charged without a usage report (charge.ts). */
export type UnreportedReason = "compressed" | "no_usage" | "cut_short" | "websocket";

/**
 * How an AI request's reservation was settled (proxy/settle.ts): to the usage its answer
 * reported, kept whole (no usable usage: cut short, compressed, none), or released but for the
 * route's cost (an error answer, or an upstream never reached).
 */
export type Settlement = "reported" | "kept" | "released";

/** Route label for requests that matched no route. */
export const NO_ROUTE = "";

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<"route" | "decision">;
  private readonly requestChildren = new Map<string, Map<RequestDecision, { inc(): void }>>();
  readonly checkDuration: LeanHistogram;
  readonly upstreamDuration: LeanHistogram;
  readonly storeErrors: Counter<"reason">;
  readonly upstreamErrors: Counter<"upstream" | "reason">;
  readonly upstreamEjections: Counter<"upstream">;
  readonly upstreamRetries: Counter<"upstream" | "outcome">;
  /** Targets per upstream and state, read when scraped (watchUpstreamTargets). */
  private targetCounts: () => Iterable<[string, { healthy: number; ejected: number }]> = () => [];
  readonly configReloads: Counter<"result">;
  readonly breakerState: Gauge;
  readonly sustainedDenials: Gauge;
  readonly localDenials: Counter;
  /** Requests refused because their caller held its whole share of the upstream (caller_share). */
  readonly callerShareRefusals: Counter<"upstream">;
  readonly authFailures: Counter<"reason">;
  private readonly nearLimit: Counter<"route">;
  private readonly nearLimitChildren = new Map<string, { inc(): void }>();
  private readonly chargedUnits: Counter<"route">;
  private readonly chargedChildren = new Map<string, { inc(units: number): void }>();
  private readonly usageUnreported: Counter<"route" | "reason">;
  private readonly unreportedChildren = new Map<string, { inc(): void }>();
  /** Budget alert events raised (alerts.thresholds, budgets spent), once per caller, limit, period and threshold. */
  readonly budgetAlerts: Counter<"limit" | "event">;
  /** Alert deliveries by webhook (`tenant` for the tenants' own) and result: sent, retried, dropped. */
  readonly alertDeliveries: Counter<"target" | "result">;
  private readonly settlements: Counter<"route" | "outcome">;
  private readonly settlementChildren = new Map<string, { inc(): void }>();
  private readonly overrun: Counter<"route" | "unit">;
  /** Stored keys looked up in the store (a cached key is none): found, unknown, error. */
  readonly keyLookups: Counter<"result">;
  /** Runtime changes applied here, by how they arrived (a reconcile catching up: lost messages). */
  readonly runtimeChanges: Counter<"via">;
  /** Fetches of the identity provider's keys (identity.jwt issuer or jwks_url), by outcome. */
  readonly jwksFetches: Counter<"outcome">;
  /** Spans handed to the OTLP exporter (telemetry.traces), by outcome: exported, failed. */
  readonly traceSpans: Counter<"outcome">;
  /** Seconds since the JWT keys in use were fetched; -1 while none is held. */
  private readonly jwksKeyAge: Gauge;
  private jwksAgeSource: (() => number | undefined) | undefined;

  /**
   * Reports the age of the identity provider's keys from now on (the gauge is registered only
   * then, so a gateway without one does not show it); `source` gives milliseconds, undefined
   * while no key set is held.
   */
  reportJwksKeyAge(source: () => number | undefined): void {
    if (this.jwksAgeSource === undefined) this.registry.registerMetric(this.jwksKeyAge);
    this.jwksAgeSource = () => {
      const ms = source();
      return ms === undefined ? undefined : Math.round(ms / 1000);
    };
  }
  /**
   * Envoy's ShouldRateLimit calls answered (src/rls/), by overall code (ok, over_limit,
   * invalid: refused as malformed) and by what decided: store, deny_cache, degraded_open,
   * degraded_closed, degraded_local, none (no descriptor had a limit). No domain or value label.
   */
  readonly rlsDecisions: Counter<"code" | "decided_by">;

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: "tollgate_" });
    // prom-client names three of its gauges with a `_total` suffix (nodejs_active_handles_total,
    // _requests_total, _resources_total), which Prometheus reserves for counters: `promtool check
    // metrics` refuses them, and rate() over them is meaningless. Each repeats the sum of the
    // per-type gauge beside it (tollgate_nodejs_active_handles{type}), so they are dropped.
    for (const metric of this.registry.getMetricsAsArray()) {
      if (metric instanceof Gauge && metric.name.endsWith("_total"))
        this.registry.removeSingleMetric(metric.name);
    }
    this.requests = new Counter({
      name: "tollgate_requests_total",
      help: "Requests by route and limit decision.",
      labelNames: ["route", "decision"],
      registers: [this.registry],
    });
    this.checkDuration = new LeanHistogram({
      name: "tollgate_limit_check_duration_seconds",
      help: "Time to decide all limits of one request, store round trip included.",
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
      registers: [this.registry],
    });
    this.upstreamDuration = new LeanHistogram({
      name: "tollgate_upstream_duration_seconds",
      help: "Time from dispatch to the end of the upstream response.",
      labelNames: ["upstream"],
      buckets: [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10],
      registers: [this.registry],
    });
    this.storeErrors = new Counter({
      name: "tollgate_store_errors_total",
      help: "Limit checks the store could not answer, by reason.",
      labelNames: ["reason"],
      registers: [this.registry],
    });
    for (const reason of ["timeout", "connection", "script", "replication", "breaker_open"])
      this.storeErrors.labels(reason).inc(0);
    this.breakerState = new Gauge({
      name: "tollgate_breaker_state",
      help: "The limit store's circuit breaker: 0 closed, 1 half-open, 2 open.",
      registers: [this.registry],
      // Across workers: the worst of them.
      aggregator: "max",
    });
    this.breakerState.set(0);
    this.configReloads = new Counter({
      name: "tollgate_config_reloads_total",
      help: "Config reloads by result: success (applied), unchanged (the files had not changed), error (refused).",
      labelNames: ["result"],
      registers: [this.registry],
    });
    for (const result of ["success", "unchanged", "error"]) this.configReloads.labels(result).inc(0);
    this.sustainedDenials = new Gauge({
      name: "tollgate_sustained_denials",
      help: "Callers denied without pause for longer than sustained_denial (a retry loop without backoff).",
      registers: [this.registry],
    });
    this.sustainedDenials.set(0);
    this.rlsDecisions = new Counter({
      name: "tollgate_rls_decisions_total",
      help: "Envoy rate-limit service calls answered, by overall code and by what decided.",
      labelNames: ["code", "decided_by"],
      registers: [this.registry],
    });
    this.localDenials = new Counter({
      name: "tollgate_local_denials_total",
      help: "Requests denied by the deny cache, without asking the store.",
      registers: [this.registry],
    });
    this.callerShareRefusals = new Counter({
      name: "tollgate_caller_share_refusals_total",
      help: "Requests refused as they would be sent on, their caller holding more than its caller_share of the upstream's connections while the pool was short.",
      labelNames: ["upstream"],
      registers: [this.registry],
    });
    this.authFailures = new Counter({
      name: "tollgate_auth_failures_total",
      help: "Invalid credentials by reason, and requests refused unchecked after too many from one IP (throttled).",
      labelNames: ["reason"],
      registers: [this.registry],
    });
    for (const reason of ["unknown_key", "ambiguous_key", "invalid_jwt", "malformed_credential", "throttled"])
      this.authFailures.labels(reason).inc(0);
    this.chargedUnits = new Counter({
      name: "tollgate_charged_units_total",
      help: "Units charged to the limits of admitted requests, by route: each request's cost, plus what its upstream reported beyond it (tokens, Tollgate-Cost).",
      labelNames: ["route"],
      registers: [this.registry],
    });
    this.usageUnreported = new Counter({
      name: "tollgate_usage_unreported_total",
      help: "Responses of charge: usage routes whose token usage could not be read, charged the route's max_cost (its cost without one), by route and reason: compressed, no_usage, cut_short, websocket.",
      labelNames: ["route", "reason"],
      registers: [this.registry],
    });
    this.settlements = new Counter({
      name: "tollgate_ai_settlements_total",
      help: "AI requests settled after their answer, by route and outcome: reported (charged the usage reported, the rest of the reservation given back), kept (no usable usage: the reservation stands), released (an error answer or an upstream never reached: all but the route's cost given back).",
      labelNames: ["route", "outcome"],
      registers: [this.registry],
    });
    this.overrun = new Counter({
      name: "tollgate_ai_overrun_total",
      help: "Units AI answers reported beyond what their requests reserved, charged after the fact (what a budget can be overspent by), by route and unit: tokens, or usd_micros.",
      labelNames: ["route", "unit"],
      registers: [this.registry],
    });
    this.budgetAlerts = new Counter({
      name: "tollgate_budget_alerts_total",
      help: "Budget alert events raised, by limit and event: budget.threshold (a share of alerts.thresholds, else calendar.alert_at, passed), budget.exhausted (the budget spent, or a request refused by it); once per caller, limit, period and threshold across every instance.",
      labelNames: ["limit", "event"],
      registers: [this.registry],
    });
    this.alertDeliveries = new Counter({
      name: "tollgate_alert_deliveries_total",
      help: "Alert deliveries by target (a webhook's name; tenant for the tenants' own URLs) and result: sent (a 2xx), retried (failed, tried again later), dropped (failed alerts.retry.max_attempts times, a target no longer configured, or the queue full).",
      labelNames: ["target", "result"],
      registers: [this.registry],
    });
    this.keyLookups = new Counter({
      name: "tollgate_key_lookups_total",
      help: "Stored API keys looked up in the store, by result (found, unknown, error); a cached key costs none, a throttled one is counted as throttled and not looked up.",
      labelNames: ["result"],
      registers: [this.registry],
    });
    for (const result of ["found", "unknown", "error", "throttled"]) this.keyLookups.labels(result).inc(0);
    this.jwksFetches = new Counter({
      name: "tollgate_jwks_fetches_total",
      help: "Fetches of the identity provider's JWT keys (discovery and JWKS), by outcome: ok, timeout, tls, network, status, too_large, invalid.",
      labelNames: ["outcome"],
      registers: [this.registry],
    });
    this.traceSpans = new Counter({
      name: "tollgate_trace_spans_total",
      help: "Spans sent to the OTLP collector (telemetry.traces), by outcome: exported, failed (dropped after the exporter's attempt).",
      labelNames: ["outcome"],
      registers: [this.registry],
    });
    const ageOf = () => this.jwksAgeSource?.();
    this.jwksKeyAge = new Gauge({
      name: "tollgate_jwks_key_age_seconds",
      help: "Seconds since the JWT keys in use were fetched from the identity provider; -1 while none was ever fetched (absent without issuer or jwks_url).",
      registers: [],
      // Across workers: the oldest keys any of them holds.
      aggregator: "max",
      collect() {
        const age = ageOf();
        this.set(age === undefined ? -1 : age);
      },
    });
    this.runtimeChanges = new Counter({
      name: "tollgate_runtime_changes_total",
      help: "Runtime changes (keys, overrides) applied by this instance, by how they arrived: local (made here), pubsub, reconcile (a lost message caught up), reset (changes may have been missed: caches dropped).",
      labelNames: ["via"],
      registers: [this.registry],
    });
    for (const via of ["local", "pubsub", "reconcile", "reset"]) this.runtimeChanges.labels(via).inc(0);
    this.nearLimit = new Counter({
      name: "tollgate_near_limit_total",
      help: "Admitted requests that left less than 20 % of one of their limits.",
      labelNames: ["route"],
      registers: [this.registry],
    });
    this.upstreamErrors = new Counter({
      name: "tollgate_upstream_errors_total",
      help: "Upstream requests that failed, by upstream and reason.",
      labelNames: ["upstream", "reason"],
      registers: [this.registry],
    });
    // Per upstream, never per target: a target's address is an unbounded label (targets come and
    // go with deploys), and the log line of each ejection names it.
    this.upstreamEjections = new Counter({
      name: "tollgate_upstream_ejections_total",
      help: "Targets taken out of rotation, by their failed requests or a failed health check.",
      labelNames: ["upstream"],
      registers: [this.registry],
    });
    this.upstreamRetries = new Counter({
      name: "tollgate_upstream_retries_total",
      help: "Retries on another target: success or failure of the retry, or not sent (budget_exhausted, no_target).",
      labelNames: ["upstream", "outcome"],
      registers: [this.registry],
    });
    const counts = () => this.targetCounts();
    new Gauge({
      name: "tollgate_upstream_targets",
      help: "Targets of each upstream by state: healthy (in rotation) or ejected.",
      labelNames: ["upstream", "state"],
      registers: [this.registry],
      // Across workers (each keeps its own health): the largest count any of them sees.
      aggregator: "max",
      collect() {
        this.reset();
        for (const [upstream, { healthy, ejected }] of counts()) {
          this.labels(upstream, "healthy").set(healthy);
          this.labels(upstream, "ejected").set(ejected);
        }
      },
    });
  }

  /** Where tollgate_upstream_targets is read from when scraped. */
  watchUpstreamTargets(source: () => Iterable<[string, { healthy: number; ejected: number }]>): void {
    this.targetCounts = source;
  }

  private readonly upstreamChildren = new Map<string, LeanHistogramChild>();

  observeUpstream(upstream: string, seconds: number): void {
    childOf(this.upstreamChildren, this.upstreamDuration, upstream).observe(seconds);
  }

  countCharged(route: string, units: number): void {
    childOf(this.chargedChildren, this.chargedUnits, route).inc(units);
  }

  countUnreported(route: string, reason: UnreportedReason): void {
    const key = `${route}\n${reason}`;
    let child = this.unreportedChildren.get(key);
    if (!child) {
      child = this.usageUnreported.labels(route, reason);
      this.unreportedChildren.set(key, child);
    }
    child.inc();
  }

  countSettlement(route: string, outcome: Settlement): void {
    const key = `${route}\n${outcome}`;
    let child = this.settlementChildren.get(key);
    if (!child) {
      child = this.settlements.labels(route, outcome);
      this.settlementChildren.set(key, child);
    }
    child.inc();
  }

  /** Units reported beyond a reservation (rare: an estimate fell short), in tokens or micro-dollars. */
  countOverrun(route: string, unit: "tokens" | "usd_micros", units: number): void {
    this.overrun.labels(route, unit).inc(units);
  }

  countNearLimit(route: string): void {
    childOf(this.nearLimitChildren, this.nearLimit, route).inc();
  }

  countRequest(route: string, decision: RequestDecision): void {
    // Child lookups hash the label values on every call; cache them per label pair, in nested
    // maps so that a request builds no key string.
    let byDecision = this.requestChildren.get(route);
    if (!byDecision) {
      byDecision = new Map();
      this.requestChildren.set(route, byDecision);
    }
    let child = byDecision.get(decision);
    if (!child) {
      child = this.requests.labels(route, decision);
      byDecision.set(decision, child);
    }
    child.inc();
  }
}

/**
 * The child of a one-label metric for `value`, kept in `cache`: prom-client hashes the label
 * values on every `labels()` call, so a per-request metric looks its child up once.
 */
function childOf<C>(cache: Map<string, C>, metric: { labels(value: string): C }, value: string): C {
  let child = cache.get(value);
  if (child === undefined) {
    child = metric.labels(value);
    cache.set(value, child);
  }
  return child;
}
