// plans.<plan>.allow as the loader, --check and the refusals see it.
import { describe, expect, it } from "vitest";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { modelEntitlement, routeEntitlement } from "../../src/proxy/entitlement.js";

const yaml = (allow: string, ai = true) => `store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:9 }
clients:
  - { id: c, key: k, plan: free }
plans:
  free:
    allow: ${allow}
routes:
  - { name: chat, match: { path: /v1/chat }, upstream: api${ai ? ", ai: { format: openai, max_output: 10 }" : ""} }
  - { name: search, match: { path: /search }, upstream: api }
`;

function report(text: string): string[] {
  const r = loadConfigText(text, "gw.yaml", {});
  return [...(r.ok ? [] : r.problems), ...r.warnings].map(formatProblem);
}

function planOf(allow: string) {
  const r = loadConfigText(yaml(allow), "gw.yaml", {});
  if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
  return compileRuntime(r.config, { file: "gw.yaml", version: "1" }).plans.get("free")!;
}

describe("--check of allow", () => {
  it("refuses an unknown route name at its entry, with a did-you-mean", () => {
    expect(report(yaml("{ routes: [chat, serach] }"))).toEqual([
      'gw.yaml:7:29: plans.free.allow.routes[1]: unknown route "serach" (did you mean "search"?)',
    ]);
  });

  it("warns of models when no route is an AI route, and passes a good allow", () => {
    expect(report(yaml('{ models: ["gpt-4o*"] }', false))[0]).toContain(
      "warning: plans.free.allow.models: allow.models is matched against the model an AI route's request names",
    );
    expect(report(yaml('{ routes: [chat], models: ["gpt-4o-mini*", o3] }'))).toEqual([]);
  });
});

describe("what a plan includes", () => {
  it("routes by name, models by exact name or * pattern", () => {
    const plan = planOf('{ routes: [chat], models: ["gpt-4o-mini*", o3] }');
    expect(routeEntitlement(plan, "chat")).toBeUndefined();
    expect(routeEntitlement(plan, "search")?.detail).toBe(
      'plan "free" does not include route "search"; it includes the route chat',
    );
    expect(modelEntitlement(plan, "gpt-4o-mini-2024-07-18")).toBeUndefined();
    expect(modelEntitlement(plan, "o3")).toBeUndefined();
    expect(modelEntitlement(plan, "o3-pro")?.code).toBe("not_entitled");
    // A pattern is the whole name: `gpt-4o-mini*` does not include `x-gpt-4o-mini`.
    expect(modelEntitlement(plan, "x-gpt-4o-mini")).toBeDefined();
    expect(modelEntitlement(plan, undefined)?.detail).toContain("this request names none");
  });

  it("includes everything without allow, or without the member", () => {
    const plan = planOf("{ routes: [chat] }");
    expect(modelEntitlement(plan, "anything")).toBeUndefined();
    expect(routeEntitlement(undefined, "search")).toBeUndefined();
    expect(planOf("{}").allow).toBeUndefined();
  });
});
