// Where alerts go and when, as compiled from the config (`alerts`, `tenants`, calendar.alert_at):
// plain data a runtime holds and a reload replaces. The queue names a delivery's target, never
// its URL or secret, so a delivery sent after a reload goes where the config now says.
import type { AlertEvent } from "./events.js";

export interface AlertTarget {
  /** `webhook:<name>` or `tenant:<id>`: what a queued delivery names. */
  id: string;
  /** Its label in tollgate_alert_deliveries_total: the webhook's name, or `tenant` for every tenant. */
  label: string;
  /** A secret (a receiver's URL often carries a token): never logged or shown. */
  url: string;
  secret: string;
  events: ReadonlySet<AlertEvent>;
  timeoutMs: number;
}

export interface AlertRetry {
  firstMs: number;
  maxDelayMs: number;
  maxAttempts: number;
}

export interface AlertSettings {
  /** Shares of a calendar budget that alert when crossed, ascending; empty: none do. */
  thresholds: readonly number[];
  webhooks: readonly AlertTarget[];
  tenants: ReadonlyMap<string, AlertTarget>;
  retry: AlertRetry;
  /** Deliveries waiting at most. */
  queueMax: number;
}

export interface WrittenAlerts {
  thresholds?: number[] | undefined;
  webhooks: {
    name: string;
    url: string;
    secret: string;
    events?: AlertEvent[] | undefined;
    timeout: number;
  }[];
  retry: { first: number; max_delay: number; max_attempts: number };
  queue: number;
}

export interface WrittenTenant {
  alert_url?: string | undefined;
  alert_secret?: string | undefined;
  alert_events?: AlertEvent[] | undefined;
  alert_timeout: number;
}

const DEFAULT_EVENTS: readonly AlertEvent[] = ["budget.threshold", "budget.exhausted"];

export function compileAlerts(
  alerts: WrittenAlerts,
  tenants: Readonly<Record<string, WrittenTenant>> | undefined,
  alertAt: number | false,
): AlertSettings {
  const thresholds = [...new Set(alerts.thresholds ?? (alertAt === false ? [] : [alertAt]))].sort(
    (a, b) => a - b,
  );
  const byTenant = new Map<string, AlertTarget>();
  for (const [id, t] of Object.entries(tenants ?? {})) {
    if (t.alert_url === undefined || t.alert_secret === undefined) continue;
    byTenant.set(id, {
      id: `tenant:${id}`,
      label: "tenant",
      url: t.alert_url,
      secret: t.alert_secret,
      events: new Set(t.alert_events ?? DEFAULT_EVENTS),
      timeoutMs: t.alert_timeout,
    });
  }
  return {
    thresholds,
    webhooks: alerts.webhooks.map((w) => ({
      id: `webhook:${w.name}`,
      label: w.name,
      url: w.url,
      secret: w.secret,
      events: new Set(w.events ?? DEFAULT_EVENTS),
      timeoutMs: w.timeout,
    })),
    tenants: byTenant,
    retry: {
      firstMs: alerts.retry.first,
      maxDelayMs: alerts.retry.max_delay,
      maxAttempts: alerts.retry.max_attempts,
    },
    queueMax: alerts.queue,
  };
}

/** The targets an event of a caller of `tenant` goes to: the webhooks that take it, and the tenant's own. */
export function targetsOf(
  settings: AlertSettings,
  event: AlertEvent,
  tenant: string | undefined,
): AlertTarget[] {
  const out = settings.webhooks.filter((w) => w.events.has(event));
  const own = tenant === undefined ? undefined : settings.tenants.get(tenant);
  if (own?.events.has(event)) out.push(own);
  return out;
}

/** The target a queued delivery names, in the running config; undefined: no longer configured. */
export function targetById(settings: AlertSettings, id: string): AlertTarget | undefined {
  if (id.startsWith("tenant:")) return settings.tenants.get(id.slice(7));
  return settings.webhooks.find((w) => w.id === id);
}

/** The wait before try `attempts + 1` of a delivery tried `attempts` times: doubling, capped, ±20 %. */
export function retryDelayMs(
  retry: AlertRetry,
  attempts: number,
  random: () => number = Math.random,
): number {
  const base = Math.min(retry.maxDelayMs, retry.firstMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}
