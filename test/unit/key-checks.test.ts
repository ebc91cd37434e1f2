// `--check` on what a limit is keyed by (`by:`) and on route limits' names: one case per mistake,
// with the exact position and message an operator sees, and the fix each message names.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { KEYED_LIMITS_EXAMPLE } from "../../src/config/docs-keyed.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";

const BASE = `store: { url: memory:// }
upstreams: { api: http://127.0.0.1:3000 }
clients:
  - { id: acme, key: k1, plan: pro, tenant: acme }
plans:
  pro:
    global: { rate: 5/s, burst: 10 }
    tenant: { rate: 50/s, burst: 100 }
    routes:
      reports: { limit: 10, window: 1m }
routes:
  - name: reports
    match: { path: /v1/reports }
    upstream: api
  - { name: default, match: { path: / }, upstream: api }
`;

/** Errors and warnings in file order, as `tollgate --check` prints them (cli.ts). */
function report(yaml: string): string[] {
  const r = loadConfigText(yaml, "gw.yaml", {});
  return [...(r.ok ? [] : r.problems), ...r.warnings]
    .sort((a, b) => a.line - b.line || a.column - b.column)
    .map(formatProblem);
}

/** The errors alone: what keeps the file from loading. */
const errors = (yaml: string) => report(yaml).filter((line) => !line.includes(": warning: "));

/** BASE with each [from, to] replaced once. */
function edit(...pairs: [string, string][]): string {
  let yaml = BASE;
  for (const [from, to] of pairs) {
    if (!yaml.includes(from)) throw new Error(`BASE has no ${from}`);
    yaml = yaml.replace(from, to);
  }
  return yaml;
}

const reportsBy = (by: string) =>
  edit(["reports: { limit: 10, window: 1m }", `reports: { limit: 10, window: 1m, by: ${by} }`]);

const JWT = `identity:
  jwt: { secret: "0123456789abcdef0123456789abcdef", default_plan: pro }
`;

const NO_JWT_CLAIM =
  "claim:org reads a claim of a verified JWT, but this file has no identity.jwt: no caller would carry one, so every request would be keyed by its caller instead; configure identity.jwt, or key by something requests carry (header:<name>)";

describe("by: claim without JWT identity", () => {
  it("refuses a claim when no caller can carry one, at the part", () => {
    expect(report(reportsBy('"claim:org"'))).toEqual([
      `gw.yaml:10:45: plans.pro.routes.reports.by: ${NO_JWT_CLAIM}`,
    ]);
    expect(report(reportsBy('[caller, "claim:org"]'))).toEqual([
      `gw.yaml:10:54: plans.pro.routes.reports.by[1]: ${NO_JWT_CLAIM}`,
    ]);
    const routeLimit = edit([
      "    upstream: api\n  - { name: default",
      '    upstream: api\n    limits: { per-org: { rate: 5/s, burst: 10, by: "claim:org" } }\n  - { name: default',
    ]);
    expect(report(routeLimit)).toEqual([`gw.yaml:15:52: routes[0].limits.per-org.by: ${NO_JWT_CLAIM}`]);
  });

  it("accepts a claim once identity.jwt verifies tokens", () => {
    expect(report(JWT + reportsBy('[caller, "claim:org"]'))).toEqual([]);
  });

  it("says nothing of claims when the identity section itself failed: its error is the one to fix", () => {
    const yaml = `identity:\n  jwt: { secret: "0123456789abcdef0123456789abcdef", default_plan: pro, isuer: x }\n${reportsBy('"claim:org"')}`;
    expect(report(yaml)).toEqual([
      expect.stringMatching(/^gw\.yaml:2:\d+: identity\.jwt: unknown key "isuer"/),
    ]);
  });
});

describe("by: a path segment the route's prefix fixes", () => {
  it("refuses segment:n within the prefix of the route's entry, naming the first that varies", () => {
    expect(report(reportsBy('"segment:2"'))).toEqual([
      'gw.yaml:10:45: plans.pro.routes.reports.by: segment:2 is "reports" in every request of route "reports" (its path /v1/reports fixes segments 1 to 2): it keys nothing but its letter case, which a client may change to get a fresh budget; key by segment:3, the first segment that varies',
    ]);
    expect(errors(reportsBy('"segment:3"'))).toEqual([]);
  });

  it("refuses it in a route's own limit, at the list entry", () => {
    const yaml = edit(
      ["path: /v1/reports }", "path: /v1/ }"],
      [
        "    upstream: api\n  - { name: default",
        '    upstream: api\n    limits: { per-x: { rate: 5/s, burst: 10, by: [route, "segment:1"] } }\n  - { name: default',
      ],
    );
    expect(report(yaml)).toEqual([
      'gw.yaml:15:58: routes[0].limits.per-x.by[1]: segment:1 is "v1" in every request of route "reports" (its path /v1/ fixes segment 1): it keys nothing but its letter case, which a client may change to get a fresh budget; key by segment:2, the first segment that varies',
    ]);
  });

  it("leaves the plan's global and tenant limits alone: they key requests of every route", () => {
    const yaml = edit(
      ["global: { rate: 5/s, burst: 10 }", 'global: { rate: 5/s, burst: 10, by: [caller, "segment:1"] }'],
      ["tenant: { rate: 50/s, burst: 100 }", 'tenant: { rate: 50/s, burst: 100, by: [tenant, "segment:1"] }'],
    );
    expect(report(yaml)).toEqual([]);
  });
});

describe("by: header names", () => {
  const NOT_TOKEN =
    "is not a header name: a header name is a token (letters, digits and !#$%&'*+-.^_`|~, 1 to 64 of them)";

  it("refuses a header name that is not a token, at the list entry", () => {
    expect(report(reportsBy('[caller, "header:x model"]'))).toEqual([
      `gw.yaml:10:54: plans.pro.routes.reports.by[1]: "x model" ${NOT_TOKEN}`,
    ]);
    const block = edit([
      "    upstream: api\n  - { name: default",
      '    upstream: api\n    limits:\n      per-model:\n        rate: 5/s\n        burst: 10\n        by:\n          - route\n          - "header:x(model)"\n  - { name: default',
    ]);
    expect(report(block)).toEqual([
      `gw.yaml:21:13: routes[0].limits.per-model.by[1]: "x(model)" ${NOT_TOKEN}`,
    ]);
  });

  it("refuses keying by the credential: secrets would become state keys", () => {
    expect(report(reportsBy('"header:X-Api-Key"'))).toEqual([
      "gw.yaml:10:45: plans.pro.routes.reports.by: header:x-api-key carries API keys: keying by it would write callers' secrets into state keys and the admin API; key by caller instead (one budget per client the credential names)",
    ]);
    expect(report(reportsBy('[caller, "header:authorization"]'))).toEqual([
      "gw.yaml:10:54: plans.pro.routes.reports.by[1]: header:authorization carries bearer keys and JWTs: keying by it would write callers' secrets into state keys and the admin API; key by caller instead (one budget per client the credential names)",
    ]);
    const ownHeader = `identity:\n  api_key: { header: X-Key }\n${reportsBy('"header:x-key"')}`;
    expect(report(ownHeader)[0]).toContain("plans.pro.routes.reports.by: header:x-key carries API keys");
    expect(errors(reportsBy('"header:x-model"'))).toEqual([]);
    for (const [header, what] of [
      ["cookie", "session cookies"],
      ["proxy-authorization", "proxy credentials"],
      ["x_api_key", "API keys"],
    ]) {
      expect(report(reportsBy(`"header:${header}"`)).join("\n")).toContain(
        `header:${header} carries ${what}`,
      );
    }
    expect(report(reportsBy('"header:tollgate-client"')).join("\n")).toContain("a header the gateway sets");
  });
});

describe("by: the plan's tenant limit", () => {
  it("refuses a by without tenant: the tenant's budget must be the tenant's", () => {
    const tenantBy = (by: string) =>
      edit(["tenant: { rate: 50/s, burst: 100 }", `tenant: { rate: 50/s, burst: 100, by: ${by} }`]);
    expect(report(tenantBy('[caller, "header:x-model"]'))).toEqual([
      "gw.yaml:8:43: plans.pro.tenant.by: plans.pro.tenant is the budget a tenant's clients share, but by: [caller, header:x-model] has no tenant part, so it would not be the tenant's; write by: [tenant, header:x-model], or make this limit global or a route limit to key it otherwise",
    ]);
    expect(report(tenantBy("caller"))).toEqual([
      "gw.yaml:8:43: plans.pro.tenant.by: plans.pro.tenant is the budget a tenant's clients share, but by: caller has no tenant part, so it would not be the tenant's; write by: tenant, or make this limit global or a route limit to key it otherwise",
    ]);
    expect(report(tenantBy('[tenant, "header:x-model"]'))).toEqual([]);
  });
});

describe("route limits' names", () => {
  it("refuses a route limit named like a plan limit, with dots in route names", () => {
    const yaml = edit(
      [
        "reports: { limit: 10, window: 1m }",
        "reports: { limit: 10, window: 1m }\n      b.total: { limit: 5, window: 1m }",
      ],
      [
        "  - { name: default",
        "  - { name: b.total, match: { path: /b }, upstream: api }\n  - { name: pro.b, match: { path: /pb }, upstream: api, limits: { total: { rate: 9/s, burst: 9 } } }\n  - { name: pro, match: { path: /p }, upstream: api, limits: { global: { rate: 9/s, burst: 9 } } }\n  - { name: default",
      ],
    );
    expect(report(yaml)).toEqual([
      'gw.yaml:17:67: routes[2].limits: this limit is named "pro.b.total", as plan "pro"\'s limit for route "b.total" is: the two would share RateLimit headers, 429 bodies, logs and admin views, and state keys when keyed alike; rename this limit',
      'gw.yaml:18:64: routes[3].limits: this limit is named "pro.global", as plan "pro"\'s global limit is: the two would share RateLimit headers, 429 bodies, logs and admin views, and state keys when keyed alike; rename this limit',
    ]);
  });

  it("passes the contract example that docs/limits.md and docs/configuration.md show", () => {
    for (const page of ["../../docs/limits.md", "../../docs/configuration.md"]) {
      const text = readFileSync(new URL(page, import.meta.url), "utf8");
      expect(text, page).toContain(`\`\`\`yaml\n${KEYED_LIMITS_EXAMPLE}\`\`\``);
    }
    expect(report(KEYED_LIMITS_EXAMPLE)).toEqual([]);
  });
});

describe("clients[].limits and by", () => {
  const withOverride = (limits: string, planRoute = "reports: { limit: 10, window: 1m }") =>
    edit(
      ["plan: pro, tenant: acme }", `plan: pro, tenant: acme, limits: ${limits} }`],
      ["reports: { limit: 10, window: 1m }", planRoute],
    );

  it("refuses a by in an override: how the limit is keyed stays the plan's", () => {
    expect(report(withOverride("{ routes: { reports: { limit: 20, window: 1m, by: ip } } }"))).toEqual([
      "gw.yaml:4:105: clients[0].limits.routes.reports: an override sizes plans.pro.routes.reports for this client, and how it is keyed stays the plan's; remove by here (by in plans.pro.routes.reports keys it for every caller of the plan)",
    ]);
    expect(report(withOverride("{ global: { rate: 9/s, burst: 20, by: caller } }"))).toEqual([
      "gw.yaml:4:93: clients[0].limits.global: an override sizes plans.pro.global for this client, and how it is keyed stays the plan's; remove by here (by in plans.pro.global keys it for every caller of the plan)",
    ]);
  });

  it("refuses an override of a plan limit whose by has no caller part: a budget callers share", () => {
    const route = (by: string) =>
      withOverride(
        "{ routes: { reports: { limit: 20, window: 1m } } }",
        `reports: { limit: 10, window: 1m, by: ${by} }`,
      );
    expect(errors(route('"header:x-org-id"'))).toEqual([
      "gw.yaml:4:71: clients[0].limits.routes: plans.pro.routes.reports is keyed by header:x-org-id, with no caller part: it is one budget shared by every caller of the plan with the same header:x-org-id, and they would disagree on its size; change it in the plan instead",
    ]);
    expect(report(route("route"))[0]).toContain(
      "plans.pro.routes.reports is keyed by route, with no caller part: it is one budget shared by every caller of the plan, and",
    );
    expect(report(route("[tenant, ip]"))[0]).toContain(
      "is keyed by [tenant, ip], with no caller part: it is one budget shared by every client of a tenant from one address, and",
    );
    expect(report(route('[ip, "segment:3"]'))[0]).toContain(
      "shared by every caller from one address with the same segment:3, and",
    );
    expect(report(route('[caller, "header:x-org-id"]'))).toEqual([]);
  });

  it("refuses a global override when the plan's global limit is shared, and keeps the route.by message", () => {
    const yaml = withOverride("{ global: { rate: 9/s, burst: 20 } }").replace(
      "global: { rate: 5/s, burst: 10 }",
      "global: { rate: 5/s, burst: 10, by: route }",
    );
    expect(report(yaml)).toEqual([
      "gw.yaml:4:61: clients[0].limits: plans.pro.global is keyed by route, with no caller part: it is one budget shared by every caller of the plan on one route, and they would disagree on its size; change it in the plan instead",
    ]);
    const byTenant = withOverride("{ routes: { reports: { limit: 20, window: 1m } } }").replace(
      "upstream: api\n  - { name: default",
      "upstream: api\n    by: tenant\n  - { name: default",
    );
    expect(report(byTenant)).toEqual([
      'gw.yaml:4:71: clients[0].limits.routes: route "reports" is limited by tenant: plans.pro.routes.reports is one budget shared by every client of a tenant, and they would disagree on its size; change it in the plan instead',
    ]);
    // The limit's own by wins over the route's: keyed per caller, the client may size it.
    expect(
      report(
        byTenant.replace(
          "reports: { limit: 10, window: 1m }",
          "reports: { limit: 10, window: 1m, by: caller }",
        ),
      ),
    ).toEqual([]);
  });
});

describe("by made only of what the client writes", () => {
  const warned = (yaml: string) =>
    report(yaml).filter((line) => line.includes("made only of what the client writes"));

  it("warns of a plan limit kept per a header, query parameter, body field or segment alone, at its by", () => {
    expect(warned(reportsBy('"header:x-org"'))).toEqual([
      "gw.yaml:10:45: warning: plans.pro.routes.reports.by: by: header:x-org is made only of what the client writes (header:x-org): a client that writes another value gets a budget of its own; add caller (by: [caller, header:x-org]) to keep it per caller, or, for a header a trusted proxy sets, list it in the route's trusted_headers",
    ]);
    expect(warned(reportsBy('[route, "query:org"]'))).toHaveLength(1);
    expect(warned(reportsBy('"segment:3"'))).toHaveLength(1);
  });

  it("says nothing once the key has a part the gateway vouches for, or the header is a trusted proxy's", () => {
    expect(warned(reportsBy('[caller, "header:x-org"]'))).toEqual([]);
    expect(warned(reportsBy('[ip, "header:x-org"]'))).toEqual([]);
    expect(warned(reportsBy('[tenant, "segment:3"]'))).toEqual([]);
    const trusted = edit(
      ["reports: { limit: 10, window: 1m }", 'reports: { limit: 10, window: 1m, by: "header:x-org" }'],
      [
        "    match: { path: /v1/reports }\n",
        "    match: { path: /v1/reports }\n    trusted_headers: [X-Org]\n",
      ],
    );
    expect(report(trusted)).toEqual([]);
  });

  it("leaves a route's shared budget per path segment alone: another segment is another resource", () => {
    const yaml = edit([
      "    match: { path: /v1/reports }\n",
      '    match: { path: /v1/reports }\n    limits: { per-report: { rate: 5/s, burst: 5, by: "segment:3" } }\n',
    ]);
    expect(warned(yaml)).toEqual([]);
  });
});
