// What `--check` says about AI routes, money budgets and body keys (src/config/ai-checks.ts, the
// units of checks.ts), one case per failure mode with the position and message an operator sees,
// and what a valid file compiles to.
import { describe, expect, it } from "vitest";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import type { WindowSpec } from "../../src/limits/spec.js";

const file = (plans: string, routes: string, top = "") => `store: { url: memory:// }
upstreams: { llm: http://127.0.0.1:3001 }
clients: [{ id: acme, key: k1, plan: team, tenant: acme }]
${top}plans:
  team:
${plans}
routes:
${routes}
`;

/** Errors and warnings in file order, as `tollgate --check` prints them. */
function report(yaml: string): string[] {
  const r = loadConfigText(yaml, "gw.yaml", {});
  return [...(r.ok ? [] : r.problems), ...r.warnings]
    .sort((a, b) => a.line - b.line || a.column - b.column)
    .map(formatProblem);
}

const MODELS = "models: { gpt-4o: { input: 2.5, output: 10 } }\n";
const AI_ROUTE =
  "  - { name: chat, match: { path: /v1 }, upstream: llm, ai: { format: openai, max_output: 4096 } }";

describe("--check on AI routes and budgets", () => {
  it("accepts a money budget beside per-model token rates, and compiles dollars to micro-dollars", () => {
    const yaml = file(
      `    tenant: { algorithm: fixed_window, limit: 199.99, window: 1 month, unit: usd }
    routes:
      chat: { rate: 1000/m, burst: 1000, unit: tokens, by: [caller, "body:model"] }`,
      AI_ROUTE,
      MODELS,
    );
    expect(report(yaml)).toEqual([]);
    const r = loadConfigText(yaml, "gw.yaml", {});
    if (!r.ok) throw new Error("must load");
    const rt = compileRuntime(r.config, { file: "gw.yaml", version: r.version });
    const tenant = rt.plans.get("team")!.limits.find((l) => l.spec.name === "team.tenant")!;
    expect((tenant.spec as WindowSpec).limit).toBe(199_990_000);
    expect(tenant.description).toContain("$199.99 per calendar month");
    const route = rt.routeList[0]!;
    expect(route.ai).toMatchObject({ format: "openai", maxOutput: 4096, clamp: false, minOutput: 16 });
    // An AI route holds its body in memory: bounded even without max_body.
    expect(route.maxBody).toBe(4 * 1024 * 1024);
    expect(rt.prices!.priceOf("gpt-4o")).toMatchObject({ input: 2_500_000, output: 10_000_000 });
  });

  it("an AI route under a budget needs max_output; a money budget needs prices, an AI route and six decimals at most", () => {
    expect(
      report(
        file(
          `    tenant: { algorithm: fixed_window, limit: 1.0000001, window: 1 month, unit: usd }`,
          "  - { name: chat, match: { path: /v1 }, upstream: llm, ai: { format: openai } }",
        ),
      ),
    ).toEqual([
      "gw.yaml:6:40: plans.team.tenant: limit 1.0000001 has more than six decimals: a money budget is kept to the micro-dollar",
      "gw.yaml:6:75: plans.team.tenant: a money budget (unit: usd) needs prices: add a top-level models table, e.g. models: { gpt-4o: { input: 2.5, output: 10 }, default: { input: 5, output: 15 } } (dollars per million tokens)",
      'gw.yaml:8:60: routes[0].ai: route "chat" is under budget plans.team.tenant: ai.max_output is required, the output ceiling a request that names none is reserved and forwarded with (e.g. max_output: 4096)',
    ]);
    expect(
      report(
        file(
          "    routes:\n      plain: { algorithm: fixed_window, limit: 5, window: 1 month, unit: usd }",
          "  - { name: plain, match: { path: /v1 }, upstream: llm }",
          MODELS,
        ),
      ),
    ).toContain(
      'gw.yaml:8:68: plans.team.routes.plain: a money budget (unit: usd) is charged only on AI routes, which price their usage: route "plain" has no ai, so it would never count; add ai: { format } to the route, or remove unit',
    );
    expect(report(file("    global: { rate: 5/s, burst: 2.5 }", AI_ROUTE))).toEqual([
      "gw.yaml:6:26: plans.team.global: burst must be a whole number (2.5 is not): only a money budget (unit: usd) is written in dollars with decimals",
    ]);
    expect(
      report(
        file(
          "    global: { rate: 5/s, burst: 2 }",
          AI_ROUTE,
          "models: { m: { input: 0.00000001, output: 1 } }\n",
        ),
      ),
    ).toEqual([
      "gw.yaml:4:23: models.m.input: 1e-8 has more than six decimals: prices are kept to the millionth of a dollar per million tokens",
    ]);
  });

  it("body:<field> only where a body is read", () => {
    expect(
      report(
        file(
          `    global: { rate: 5/s, burst: 10, by: [caller, "body:model"] }`,
          `${AI_ROUTE}\n  - { name: other, match: { path: /other }, upstream: llm }`,
        ),
      ),
    ).toContain(
      "gw.yaml:6:41: plans.team.global.by: body:<field> reads an AI route's request body, but this limit applies to every route and some are not AI routes (their bodies are never read, so every such request would be keyed by its caller); key it in the plan's entry for an AI route instead",
    );
    expect(report(file(`    global: { rate: 5/s, burst: 10, by: "body:a.b" }`, AI_ROUTE))[0]).toMatch(
      /"a.b" is not a body field tollgate can key by/,
    );
  });

  it("settings that mean nothing on an AI route are refused; a budgeted route that never reads usage is warned about", () => {
    expect(
      report(
        file(
          "    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month, unit: tokens }",
          `  - { name: chat, match: { path: /v1 }, upstream: llm, charge: usage, max_cost: 10, ai: { format: anthropic, max_output: 10, output_field: max_tokens } }
  - { name: rest, match: { path: / }, upstream: llm }`,
        ),
      ),
    ).toEqual([
      "gw.yaml:8:64: routes[0].charge: an AI route reads usage by its ai.format; remove charge: usage",
      "gw.yaml:8:81: routes[0].max_cost: an AI route reserves each request's own estimate (its prompt and output ceiling) instead of a max_cost; remove max_cost, and set ai.max_output",
      "gw.yaml:8:140: routes[0].ai.output_field: output_field applies to format openai; anthropic requests have one ceiling field (max_tokens)",
      'gw.yaml:9:5: warning: routes[1]: route "rest" forwards request bodies under budget plans.team.tenant, but never reads what its answers used: each request costs its cost (1) of it, so a completion behind this route is almost free; make it an AI route (ai: { format: openai }), add charge: usage, or limit its methods to GET',
    ]);
    // A GET-only route carries no completion: no warning.
    expect(
      report(
        file(
          "    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month, unit: tokens }",
          `${AI_ROUTE}\n  - { name: models, match: { path: /v1/models, methods: [GET] }, upstream: llm }`,
        ),
      ),
    ).toEqual([]);
  });
  it("names the budget a route meets that matters most: a money budget before a token one, else the plan-wide one", () => {
    const rest = "  - { name: rest, match: { path: / }, upstream: llm }";
    const warning = (plans: string) =>
      report(file(plans, rest, MODELS)).find((line) => line.includes("warning: routes[0]"));
    // The plan-wide token budget comes first in the file, the route's money budget wins.
    expect(
      warning(`    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month, unit: tokens }
    routes:
      rest: { algorithm: fixed_window, limit: 5, window: 1 month, unit: usd }`),
    ).toContain("under money budget plans.team.routes.rest, which is charged only on AI routes");
    // Two token budgets: the plan-wide one (global, tenant, then the routes', wherever written).
    expect(
      warning(`    routes:
      rest: { algorithm: fixed_window, limit: 5, window: 1 month, unit: tokens }
    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month, unit: tokens }`),
    ).toContain("under budget plans.team.tenant, but never reads");
    expect(
      warning(`    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month, unit: tokens }
    routes:
      rest: { algorithm: fixed_window, limit: 5, window: 1 month, unit: tokens }`),
    ).toContain("under budget plans.team.tenant, but never reads");
    // A budget on another route, or a request limit, is not this route's budget.
    expect(
      warning(`    global: { rate: 5/s, burst: 10 }
    routes:
      elsewhere: { algorithm: fixed_window, limit: 5, window: 1 month, unit: tokens }`),
    ).toBeUndefined();
  });
});
