// The map form of a plan's route entry, as the loader, --check and the compiler see it.
import { describe, expect, it } from "vitest";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";

const head = `store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:9 }
routes:
  - { name: search, match: { path: /search }, upstream: api }
  - { name: other, match: { path: /other }, upstream: api }
`;

function report(yaml: string): string[] {
  const r = loadConfigText(yaml, "gw.yaml", {});
  return (r.ok ? [] : r.problems).map(formatProblem);
}

describe("plans.<plan>.routes.<route> as a map of named limits", () => {
  it("compiles each as <plan>.<route>.<name>, beside the plan's global and the single form", () => {
    const r = loadConfigText(
      `${head}plans:
  free:
    global: { rate: 100/s, burst: 100 }
    routes:
      search:
        per-second: { rate: 10/s, burst: 10 }
        daily: { algorithm: fixed_window, limit: 10000, window: 1d }
      other: { rate: 1/s, burst: 1 }
`,
      "gw.yaml",
      {},
    );
    if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
    const rt = compileRuntime(r.config, { file: "gw.yaml", version: "1" });
    const plan = rt.plans.get("free")!;
    expect(plan.limitsByRoute.get("search")!.map((l) => l.spec.name)).toEqual([
      "free.global",
      "free.search.per-second",
      "free.search.daily",
    ]);
    expect(plan.limitsByRoute.get("other")!.map((l) => l.spec.name)).toEqual(["free.global", "free.other"]);
  });

  it("says what is wrong with either form, at its position", () => {
    expect(
      report(`${head}plans:
  free:
    routes:
      search: { rat: 5/s }
      other: { daily: { limt: 3, window: 1d } }
`),
    ).toEqual([
      'gw.yaml:9:17: plans.free.routes.search: unknown key "rat"; did you mean "rate"?',
      'gw.yaml:10:25: plans.free.routes.other.daily: unknown key "limt"; did you mean "limit"?',
    ]);
    expect(report(`${head}plans:\n  free:\n    routes:\n      search: {}\n`)[0]).toContain(
      "a token bucket needs rate + burst",
    );
    expect(
      report(`${head}plans:\n  free:\n    routes:\n      search: { a.b: { rate: 1/s } }\n`)[0],
    ).toContain("<plan>.<route>.<name>");
  });

  it("lets a client size named limits by name only, in the same form as its plan", () => {
    const plan = `plans:
  free:
    routes:
      search:
        per-second: { rate: 10/s, burst: 10 }
        daily: { algorithm: fixed_window, limit: 100, window: 1d }
`;
    const client = (limits: string) =>
      `${head}${plan}clients:\n  - { id: c, key: k, plan: free, limits: ${limits} }\n`;
    expect(report(client("{ routes: { search: { rate: 1/s, burst: 1 } } }"))[0]).toContain(
      "is a map of named limits (per-second, daily): size them by name here",
    );
    expect(
      report(
        client("{ routes: { search: { dayly: { algorithm: fixed_window, limit: 5, window: 1d } } } }"),
      )[0],
    ).toContain('no limit "dayly" for route "search" to override (did you mean "daily"?)');
    const r = loadConfigText(
      client("{ routes: { search: { daily: { algorithm: fixed_window, limit: 5, window: 1d } } } }"),
      "gw.yaml",
      {},
    );
    if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
    const rt = compileRuntime(r.config, { file: "gw.yaml", version: "1" });
    const compiled = [...rt.clientsByKeyHash.values()].find((c) => c.id === "c")!;
    const limits = compiled.plan.limitsByRoute.get("search")!;
    expect(
      limits.map((l) => [l.spec.name, (l.written as { limit?: number; burst?: number }).limit ?? "rate"]),
    ).toEqual([
      ["free.search.per-second", "rate"],
      ["free.search.daily", 5],
    ]);
  });
});

describe("names two limits could share", () => {
  it("refuses a map entry and a dotted route's single limit that would both be <plan>.<route>.<name>", () => {
    const yaml = `store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:9 }
clients:
  - { id: a, key: k, plan: free }
plans:
  free:
    routes:
      search: { daily: { algorithm: fixed_window, limit: 5, window: 1d } }
      search.daily: { rate: 1/s, burst: 2 }
routes:
  - { name: search, match: { path: /search }, upstream: api }
  - { name: search.daily, match: { path: /sd }, upstream: api }
`;
    expect(report(yaml)).toEqual([
      'gw.yaml:9:7: plans.free.routes: plan "free"\'s limit for route "search.daily" is named "free.search.daily", as plan "free"\'s limit "daily" for route "search" is: the two would share RateLimit headers, 429 bodies, logs, admin views and their state key, each overwriting the other\'s count; rename one',
    ]);
  });
});
