// What `--check` finds wrong with budget alerts beyond the schema: two webhooks of one name,
// receivers that will never hear anything (no threshold is configured, or no limit is a
// calendar budget), a tenant's URL no client of the file names, and a secret too short to sign
// with. Messages never quote a URL or a secret.
import type { CheckableConfig } from "./checkable.js";
import type { PathSegment } from "./document.js";
import { planRouteLimits } from "./plan-routes.js";
import type { LimitConfig } from "./schema.js";
import { isCalendarWindow, type WindowLength } from "./units.js";

type Add = (path: PathSegment[], message: string, atKey?: string) => void;

/** Shorter than this, a signing secret can be guessed. */
const MIN_SECRET = 16;

export function checkAlerts(config: CheckableConfig, add: Add, warn: Add): void {
  const { alerts } = config;
  const names = new Set<string>();
  alerts.webhooks.forEach((w, i) => {
    if (!w) return;
    if (names.has(w.name)) add(["alerts", "webhooks", i, "name"], `duplicate webhook name "${w.name}"`);
    names.add(w.name);
    if (w.secret.length < MIN_SECRET)
      warn(
        ["alerts", "webhooks", i, "secret"],
        `the secret is shorter than ${MIN_SECRET} characters: a receiver cannot trust a signature made with it (openssl rand -hex 32 makes one)`,
      );
  });
  const receivers =
    alerts.webhooks.length > 0 || Object.values(config.tenants ?? {}).some((t) => t?.alert_url);
  if (!receivers) return;
  if (alerts.thresholds === undefined && config.calendar.alert_at === false)
    warn(
      ["alerts"],
      "no alert is ever raised: calendar.alert_at is false and alerts.thresholds is not set; set thresholds (e.g. [50%, 80%, 100%])",
    );
  if (!hasCalendarBudget(config))
    warn(
      ["alerts"],
      "no limit counts a calendar period (window: 1 day, 1 week or 1 month): alerts come from calendar budgets, so none will be raised",
    );
  const tenants = new Set(config.clients.map((c) => c?.tenant).filter((t) => t !== undefined));
  for (const [id, t] of Object.entries(config.tenants ?? {})) {
    if (t?.alert_url === undefined) continue;
    if (t.alert_secret !== undefined && t.alert_secret.length < MIN_SECRET)
      warn(["tenants", id, "alert_secret"], `the secret is shorter than ${MIN_SECRET} characters`);
    if (!tenants.has(id))
      warn(
        ["tenants", id],
        `no client of this file has tenant "${id}": its alerts reach this URL only for keys issued at runtime with that tenant`,
        id,
      );
  }
}

function hasCalendarBudget(config: CheckableConfig): boolean {
  const calendar = (l: LimitConfig | undefined) =>
    l !== undefined && isCalendarWindow((l as { window?: WindowLength }).window);
  for (const plan of Object.values(config.plans)) {
    if (calendar(plan.global) || calendar(plan.tenant)) return true;
    if (planRouteLimits(plan.routes).some((l) => calendar(l.limit))) return true;
  }
  for (const route of config.routes) if (route && Object.values(route.limits).some(calendar)) return true;
  for (const client of config.clients) {
    if (!client?.limits) continue;
    if (
      calendar(client.limits.global) ||
      planRouteLimits(client.limits.routes).some((l) => calendar(l.limit))
    )
      return true;
  }
  return false;
}
