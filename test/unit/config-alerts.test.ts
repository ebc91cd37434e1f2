// `alerts` and `tenants` in the config: what the schema and `--check` refuse or warn of, at the
// position, never quoting a URL or a secret; and what the runtime compiles them to.
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { runtimeOf } from "./support/proxy-fakes.js";

const BASE = `store: { url: memory:// }
upstreams: { api: http://127.0.0.1:3001 }
routes:
  - { name: chat, match: { path: / }, upstream: api }
plans:
  pro: { routes: { chat: { algorithm: fixed_window, limit: 100, window: 1 month } } }
clients:
  - { id: alice, key: k, plan: pro, tenant: acme }
`;

function check(yaml: string, env: Record<string, string> = {}): { errors: string[]; warnings: string[] } {
  const r = loadConfigText(yaml, "gw.yaml", env);
  if (!r.ok) return { errors: r.problems.map(formatProblem), warnings: [] };
  return { errors: [], warnings: r.warnings.map(formatProblem) };
}

describe("alerts in the config", () => {
  it("refuses a duplicate webhook, a URL that is not http(s), an unknown event, a tenant URL without its secret", () => {
    const { errors } = check(
      `${BASE}alerts:
  thresholds: [50%, 120%]
  webhooks:
    - { name: billing, url: "https://h.example/a?token=tok-secret", secret: "\${S}" }
    - { name: billing, url: "ftp://h.example/b", secret: "sec-secret-0123456789", events: [budget.gone] }
tenants:
  acme: { alert_url: "https://acme.example/x" }
`,
      { S: "hook-secret-0123456789" },
    );
    expect(errors).toEqual([
      "gw.yaml:10:15: alerts.thresholds: a threshold is above 0% and at most 100%",
      "gw.yaml:13:29: alerts.webhooks[1].url: expected the receiver's http:// or https:// URL",
      "gw.yaml:13:92: alerts.webhooks[1].events[0]: expected one of budget.threshold, budget.exhausted, budget.reset",
      "gw.yaml:15:22: tenants.acme.alert_url: alert_url needs alert_secret, the secret its deliveries are signed with",
    ]);
    const dup = check(`${BASE}alerts:
  webhooks:
    - { name: billing, url: "https://h.example/a", secret: "a-secret-0123456789" }
    - { name: billing, url: "https://h.example/b", secret: "b-secret-0123456789" }
`);
    expect(dup.errors).toEqual(['gw.yaml:12:15: alerts.webhooks[1].name: duplicate webhook name "billing"']);

    for (const e of errors) expect(e).not.toMatch(/tok-secret|hook-secret|sec-secret/);
  });

  it("warns of receivers that will hear nothing, and of a short secret", () => {
    expect(
      check(`${BASE}calendar: { alert_at: false }
alerts:
  webhooks: [{ name: b, url: "https://h.example/a", secret: short }]
tenants:
  nobody: { alert_url: "https://n.example/", alert_secret: "n-secret-0123456789" }
`).warnings,
    ).toEqual([
      "gw.yaml:11:3: warning: alerts: no alert is ever raised: calendar.alert_at is false and alerts.thresholds is not set; set thresholds (e.g. [50%, 80%, 100%])",
      "gw.yaml:11:61: warning: alerts.webhooks[0].secret: the secret is shorter than 16 characters: a receiver cannot trust a signature made with it (openssl rand -hex 32 makes one)",
      'gw.yaml:13:11: warning: tenants.nobody: no client of this file has tenant "nobody": its alerts reach this URL only for keys issued at runtime with that tenant',
    ]);
    const rolling = BASE.replace("window: 1 month", "window: 30d");
    expect(
      check(
        `${rolling}alerts: { webhooks: [{ name: b, url: "https://h.example/", secret: "b-secret-0123456789" }] }\n`,
      ).warnings,
    ).toEqual([
      "gw.yaml:9:9: warning: alerts: no limit counts a calendar period (window: 1 day, 1 week or 1 month): alerts come from calendar budgets, so none will be raised",
    ]);
  });

  it("compiles thresholds (alert_at without them), targets and retries; defaults hold", () => {
    const rt = runtimeOf(`${BASE}alerts:
  thresholds: [80%, 50%]
  webhooks: [{ name: billing, url: "https://h.example/", secret: "b-secret-0123456789", timeout: 2s }]
  retry: { first: 500ms }
tenants:
  acme: { alert_url: "https://acme.example/", alert_secret: "a-secret-0123456789", alert_events: [budget.reset] }
`);
    expect(rt.alerts.thresholds).toEqual([0.5, 0.8]);
    expect(rt.alerts.webhooks.map((w) => [w.id, w.label, [...w.events], w.timeoutMs])).toEqual([
      ["webhook:billing", "billing", ["budget.threshold", "budget.exhausted"], 2000],
    ]);
    expect([...rt.alerts.tenants.values()].map((t) => [t.id, [...t.events]])).toEqual([
      ["tenant:acme", ["budget.reset"]],
    ]);
    expect(rt.alerts.retry).toEqual({ firstMs: 500, maxDelayMs: 300_000, maxAttempts: 20 });
    expect(rt.alerts.queueMax).toBe(10_000);
    const plain = runtimeOf(BASE);
    expect(plain.alerts.thresholds).toEqual([0.8]);
    expect(plain.alerts.webhooks).toEqual([]);
    expect(runtimeOf(`${BASE}calendar: { alert_at: false }\n`).alerts.thresholds).toEqual([]);
  });
});
