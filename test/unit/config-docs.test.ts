// docs/configuration.md is generated from the schema; this fails when it is stale (run
// `npm run docs`), and the generator itself refuses a key with neither a default nor an example.
// The page's claims are held to the gateway: its minimal file passes, every key of that file is
// needed, what it calls required is refused when missing, and its defaults are what a file
// without the key gets.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse as parseYaml, stringify } from "yaml";
import { configReference, MINIMAL_CONFIG } from "../../src/config/docs.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { jsonSchema } from "../../src/config/schema.js";

const generated = configReference(jsonSchema() as never);
const committed = readFileSync(new URL("../../docs/configuration.md", import.meta.url), "utf8");

/** The rows of the first table: key → { required, default }. */
function rows(page: string): Map<string, { required: string; default: string }> {
  const out = new Map<string, { required: string; default: string }>();
  for (const line of page.split("\n")) {
    const cells = line.split(/(?<!\\)\|/).map((c) => c.trim());
    if (!cells[1]?.startsWith("`")) continue;
    out.set(cells[1].slice(1, -1), { required: cells[3]!, default: cells[4]!.replace(/^`|`$/g, "") });
  }
  return out;
}

function load(yaml: string) {
  const r = loadConfigText(yaml, "minimal.yaml", {});
  return { ok: r.ok, problems: r.ok ? [] : r.problems.map(formatProblem), warnings: r.warnings };
}

describe("docs/configuration.md", () => {
  it("matches the schema (run `npm run docs` after changing src/config/schema.ts)", () => {
    expect(committed).toBe(generated);
  });

  it("documents every key of the schema, each with an example", () => {
    for (const key of [
      "store.breaker.cooldown",
      "identity.jwt.jwks_file",
      "routes[].max_body",
      "<limit>.queue",
      "sustained_denial",
    ]) {
      expect(generated).toContain(`| \`${key}\` |`);
    }
    for (const line of generated.split("\n").filter((l) => l.startsWith("| `"))) {
      expect(line.trim().endsWith("| `` |"), line).toBe(false);
    }
  });

  it("opens with a minimal complete file that passes --check without a warning", () => {
    const block = /^## A minimal complete file\n[\s\S]*?```yaml\n([\s\S]*?)```/m.exec(committed);
    expect(block).not.toBeNull();
    const example = block![1]!;
    expect(example).toBe(MINIMAL_CONFIG);
    expect(load(example)).toEqual({ ok: true, problems: [], warnings: [] });
  });

  it("needs every key of that minimal file: without any one of them it is refused", () => {
    const full = parseYaml(MINIMAL_CONFIG) as Record<string, unknown>;
    const leaves: string[][] = [];
    const visit = (value: unknown, path: string[]) => {
      if (value !== null && typeof value === "object" && !Array.isArray(value)) {
        for (const [k, v] of Object.entries(value)) visit(v, [...path, k]);
      } else if (Array.isArray(value)) {
        for (const [i, v] of value.entries()) visit(v, [...path, String(i)]);
      } else leaves.push(path);
    };
    visit(full, []);
    expect(leaves.map((p) => p.join("."))).toEqual([
      "store.url",
      "upstreams.api",
      "routes.0.name",
      "routes.0.match.path",
      "routes.0.upstream",
    ]);
    for (const path of leaves) {
      const copy = structuredClone(full);
      let parent = copy as Record<string, unknown>;
      for (const p of path.slice(0, -1)) parent = parent[p] as Record<string, unknown>;
      delete parent[path.at(-1)!];
      expect(load(stringify(copy)).ok, path.join(".")).toBe(false);
    }
  });

  it("marks required exactly what the gateway refuses without, and no default that is not one", () => {
    const table = rows(committed);
    // The false default this page used to show: a file without store is refused.
    expect(table.get("store.url")).toEqual({ required: "one of `url`, `cluster`, `sentinel`", default: "" });
    expect(table.get("upstreams.<name>")!.required).toBe("yes: at least one");
    expect(table.get("upstreams.<name>.url")!.required).toBe(
      "yes, in the mapping form: one of `url`, `targets`",
    );
    expect(table.get("upstreams.<name>.timeout")).toEqual({ required: "no", default: "30s" });
    for (const key of [
      "routes[].name",
      "routes[].match.path",
      "routes[].upstream",
      "clients[].id",
      "clients[].plan",
    ])
      expect(table.get(key)!.required, key).toBe("yes");
    expect(table.get("clients[].key")!.required).toBe("one of `key_sha256`, `key`");
    expect(table.get("store.sentinel.name")!.required).toBe(
      "with `store.sentinel` (one of `url`, `cluster`, `sentinel`)",
    );
    expect(table.get("identity.jwt.secret")!.required).toBe(
      "with `identity.jwt`: one of `secret`, `public_key_file`, `jwks_file`, `jwks_url`",
    );
    expect(table.get("identity.jwt.default_plan")!.required).toBe(
      "with `identity.jwt`: `claims.plan` or `default_plan` (or both)",
    );
    expect(table.get("identity.auth_failures")!.default).toBe("{ limit: 20, window: 1m }");
    const yes = [...table].filter(([, r]) => r.required === "yes").map(([k]) => k);
    expect(yes).toEqual([
      "admin.tokens[].name",
      "admin.tokens[].token",
      "admin.tokens[].scope",
      // A map's entries need their values: each header set is given one.
      "upstreams.<name>.request_headers.set.<name>",
      "upstreams.<name>.response_headers.set.<name>",
      "clients[].id",
      "clients[].plan",
      "routes[].name",
      "routes[].match.path",
      "routes[].upstream",
      "routes[].request_headers.set.<name>",
      "routes[].response_headers.set.<name>",
      "models.<name>.input",
      "models.<name>.output",
      "alerts.webhooks[].name",
      "alerts.webhooks[].url",
      "alerts.webhooks[].secret",
      "telemetry.traces.headers.<name>",
    ]);
  });

  it("shows as default of each key what a file without it gets", () => {
    // Writing the documented default into the minimal file changes nothing.
    const base = loadConfigText(MINIMAL_CONFIG, "minimal.yaml", {});
    if (!base.ok) throw new Error("the minimal config must load");
    let checked = 0;
    for (const [key, row] of rows(committed)) {
      // Keys of list items and map entries need an item; identity.jwt, store.replicas,
      // telemetry.traces and rls bring requirements of their own (a key without a default beside them).
      if (
        !row.default ||
        key.includes("[]") ||
        key.includes("<") ||
        key.startsWith("identity.jwt.") ||
        key.startsWith("store.replicas.") ||
        key.startsWith("telemetry.traces.") ||
        key.startsWith("rls.")
      )
        continue;
      const file = parseYaml(MINIMAL_CONFIG) as Record<string, unknown>;
      const path = key.split(".");
      let parent = file;
      for (const p of path.slice(0, -1)) {
        parent[p] ??= {};
        parent = parent[p] as Record<string, unknown>;
      }
      parent[path.at(-1)!] = parseYaml(row.default);
      const r = loadConfigText(stringify(file), "minimal.yaml", {});
      expect(r.ok ? [] : r.problems.map(formatProblem), key).toEqual([]);
      if (r.ok) expect(r.config, key).toEqual(base.config);
      checked++;
    }
    expect(checked).toBeGreaterThan(25);
  });
});
