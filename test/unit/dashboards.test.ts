// The shipped Grafana dashboard and Prometheus alerts parse, and name only metrics the gateway
// exports: a renamed metric must not leave a blank panel or an alert that never fires.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { Metrics } from "../../src/observability/metrics.js";

const root = new URL("../../", import.meta.url).pathname;

async function exportedSeries(): Promise<Set<string>> {
  const text = await new Metrics().registry.metrics();
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m;
    names.add(name!);
    if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(name + suffix);
  }
  return names;
}

const metricNames = (expr: string) => [...expr.matchAll(/\btollgate_[a-z0-9_]+/g)].map((m) => m[0]);

describe("dashboards and alerts", () => {
  it("config/prometheus-alerts.yaml parses and names only exported metrics", async () => {
    const exported = await exportedSeries();
    const doc = parse(readFileSync(`${root}config/prometheus-alerts.yaml`, "utf8"));
    const rules = doc.groups.flatMap((g: { rules: { alert: string; expr: string }[] }) => g.rules);
    expect(rules.length).toBeGreaterThanOrEqual(4);
    const alerts = rules.map((r: { alert: string }) => r.alert);
    for (const needed of [
      "TollgateBreakerOpen",
      "TollgateStoreErrors",
      "TollgateSustainedDenials",
      "TollgateUpstreamErrors",
    ]) {
      expect(alerts).toContain(needed);
    }
    // No alert claims 5xx responses: no exported metric has a status label to count them by.
    for (const rule of rules) expect(rule.alert).not.toMatch(/5xx/i);
    for (const rule of rules) {
      const names = metricNames(rule.expr);
      expect(names.length, rule.alert).toBeGreaterThan(0);
      for (const name of names) expect(exported, `${rule.alert}: ${name}`).toContain(name);
    }
  });

  it("config/grafana-dashboard.json parses and names only exported metrics", async () => {
    const exported = await exportedSeries();
    const dashboard = JSON.parse(readFileSync(`${root}config/grafana-dashboard.json`, "utf8"));
    const exprs: string[] = dashboard.panels.flatMap((p: { targets: { expr: string }[] }) =>
      p.targets.map((t) => t.expr),
    );
    const titles = dashboard.panels.map((p: { title: string }) => p.title).join(" | ");
    for (const topic of ["decision", "latency", "Breaker", "Upstream", "denied without pause"])
      expect(titles).toContain(topic);
    for (const expr of exprs) {
      for (const name of metricNames(expr)) expect(exported, `${expr}: ${name}`).toContain(name);
    }
  });

  it("TollgateUpstreamErrors counts transport failures, and says so", () => {
    const doc = parse(readFileSync(`${root}config/prometheus-alerts.yaml`, "utf8"));
    const rule = doc.groups
      .flatMap(
        (g: { rules: { alert: string; expr: string; annotations: Record<string, string> }[] }) => g.rules,
      )
      .find((r: { alert: string }) => r.alert === "TollgateUpstreamErrors");
    expect(metricNames(rule.expr)).toEqual(["tollgate_upstream_errors_total"]);
    const words = `${rule.annotations.summary} ${rule.annotations.description}`;
    expect(words).not.toMatch(/5xx|50[0-9]/);
    expect(words).toMatch(/refused, reset or timed out/);
  });

  it("tollgate_config_reloads_total exports every result the dashboard and docs name", async () => {
    const text = await new Metrics().registry.metrics();
    for (const result of ["success", "unchanged", "error"])
      expect(text).toContain(`tollgate_config_reloads_total{result="${result}"} 0`);
    const docs = readFileSync(`${root}docs/operations.md`, "utf8");
    expect(docs).toContain('result="unchanged"');
  });

  it("TollgateBreakerOpen keeps firing while the breaker is half-open between probes", () => {
    // A Redis outage at low traffic alternates open (2) and half-open (1); an alert on `== 2`
    // restarts its `for` at every half-open sample and never fires.
    const doc = parse(readFileSync(`${root}config/prometheus-alerts.yaml`, "utf8"));
    const rule = doc.groups
      .flatMap((g: { rules: { alert: string; expr: string; for?: string }[] }) => g.rules)
      .find((r: { alert: string }) => r.alert === "TollgateBreakerOpen");
    expect(rule.expr).not.toMatch(/==\s*2/);
    expect(rule.expr).toMatch(/\bmax_over_time\(tollgate_breaker_state\[\d+[sm]\]\)/);
    expect(rule.expr).toMatch(/>\s*0\s*$/);
    expect(rule.for).toBe("1m");
  });

  const promtool = process.env.PROMTOOL ?? "promtool";
  const hasPromtool = spawnSync(promtool, ["--version"]).status === 0;
  it.skipIf(!hasPromtool)("config/prometheus-alerts.test.yaml passes promtool test rules", () => {
    const r = spawnSync(promtool, ["test", "rules", `${root}config/prometheus-alerts.test.yaml`], {
      encoding: "utf8",
    });
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
  });
});
