// The rooms' dependency rules (docs/architecture.md), read from the import statements of src/:
// a change that makes the orchestrator depend on a concrete store, the proxy on the admin API, or
// the library entry on the gateway fails here, before it shows up as a tangle.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith(".ts") ? [full] : [];
  });
}

/** Every relative module a file imports or re-exports (types included), as paths under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specifiers = [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s+"(\.{1,2}\/[^"]+)"/g),
  ].map((m) => m[1]!);
  return specifiers.map((s) =>
    path.relative(SRC, path.resolve(path.dirname(file), s)).replace(/\.js$/, ".ts"),
  );
}

const FILES = sourceFiles(SRC).map((file) => ({ file: path.relative(SRC, file), imports: importsOf(file) }));

/** `from` files (a prefix under src/) that import a module under one of `forbidden`. */
function violations(from: (file: string) => boolean, forbidden: readonly string[]): string[] {
  const found: string[] = [];
  for (const { file, imports } of FILES) {
    if (!from(file)) continue;
    for (const target of imports) {
      if (forbidden.some((f) => target === f || target.startsWith(f))) found.push(`${file} → ${target}`);
    }
  }
  return found;
}

/** Every module `entry` reaches through relative imports. */
function reachable(entry: string): Set<string> {
  const byFile = new Map(FILES.map((f) => [f.file, f.imports]));
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const next of byFile.get(file) ?? []) visit(next);
  };
  visit(entry);
  return seen;
}

/** The import cycles of src/ (type imports included): each as its sorted list of files. */
function cycles(): string[][] {
  const byFile = new Map(FILES.map((f) => [f.file, f.imports.filter((t) => t !== f.file)]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (file: string) => {
    index.set(file, next);
    low.set(file, next);
    next++;
    stack.push(file);
    onStack.add(file);
    for (const target of byFile.get(file) ?? []) {
      if (!byFile.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!));
    }
    if (low.get(file) === index.get(file)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== file);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const file of byFile.keys()) if (!index.has(file)) visit(file);
  return found;
}

describe("import cycles", () => {
  it("finds a cycle where there is one (the search is not vacuous)", () => {
    const a = { file: "zz/a.ts", imports: ["zz/b.ts"] };
    const b = { file: "zz/b.ts", imports: ["zz/a.ts"] };
    FILES.push(a, b);
    try {
      expect(cycles()).toEqual([["zz/a.ts", "zz/b.ts"]]);
    } finally {
      FILES.splice(FILES.indexOf(a), 2);
    }
  });

  it("has none in src/, type imports included", () => {
    expect(cycles()).toEqual([]);
  });
});

describe("dependency rules between rooms", () => {
  it("reads the imports it checks (the rules below are not vacuous)", () => {
    expect(FILES.length).toBeGreaterThan(50);
    expect(FILES.find((f) => f.file === "proxy/pipeline.ts")?.imports).toContain("proxy/admit.ts");
  });

  it("the rooms below the config import nothing from config/ (bar the library's config-checking entry)", () => {
    const below = ["identity/", "limits/", "routing/", "upstream/", "usage/", "model/"];
    const rooms = (f: string) => below.some((b) => f.startsWith(b)) && f !== "limits/create-limiter.ts";
    expect(FILES.filter((f) => f.file.startsWith("model/")).length).toBeGreaterThan(2);
    expect(violations(rooms, ["config/"])).toEqual([]);
  });

  it("no module of limits/ outside stores/ imports a concrete store", () => {
    const orchestration = (f: string) => f.startsWith("limits/") && !f.startsWith("limits/stores/");
    expect(violations(orchestration, ["limits/stores/memory.ts", "limits/stores/redis/"])).toEqual([]);
  });

  it("the stores depend on the contract and the algorithms, never on the limiter or its decorators", () => {
    const stores = (f: string) => f.startsWith("limits/stores/");
    expect(
      violations(stores, [
        "limits/limiter.ts",
        "limits/deny-cache.ts",
        "limits/reservations.ts",
        "limits/denials.ts",
        "limits/gateway-limiter.ts",
        "limits/breaker.ts",
      ]),
    ).toEqual([]);
  });

  it("proxy/ does not import admin/, and nothing below the gateway imports the gateway", () => {
    expect(violations((f) => f.startsWith("proxy/"), ["admin/"])).toEqual([]);
    const below = [
      "limits/",
      "routing/",
      "identity/",
      "http/",
      "config/",
      "observability/",
      "proxy/",
      "upstream/",
    ];
    expect(violations((f) => below.some((b) => f.startsWith(b)), ["gateway/", "cli.ts"])).toEqual([]);
  });

  it("nothing imports upward from the gateway: only cli.ts starts one", () => {
    const outside = (f: string) => !f.startsWith("gateway/") && f !== "cli.ts";
    expect(violations(outside, ["gateway/"])).toEqual([]);
  });

  it("the rooms the proxy is built on never import the proxy or the admin API", () => {
    const base = ["limits/", "routing/", "identity/", "config/", "observability/", "upstream/", "errors.ts"];
    expect(violations((f) => base.some((b) => f.startsWith(b)), ["proxy/", "admin/"])).toEqual([]);
  });

  it("the operators' commands (cli/) import only cli/: a client of the admin API, not a gateway", () => {
    const commands = FILES.filter((f) => f.file.startsWith("cli/"));
    expect(commands.map((f) => f.file)).toContain("cli/admin-command.ts");
    const outside = commands.flatMap(({ file, imports }) =>
      imports.filter((target) => !target.startsWith("cli/")).map((target) => `${file} → ${target}`),
    );
    expect(outside).toEqual([]);
  });

  it("the library entry reaches the limiter and stores, never the gateway, proxy, admin API or logs", () => {
    const reached = [...reachable("index.ts")];
    expect(reached).toContain("limits/create-limiter.ts");
    expect(reached).toContain("limits/stores/redis/store.ts");
    expect(reached.filter((f) => /^(gateway|proxy|admin|observability)\//.test(f) || f === "cli.ts")).toEqual(
      [],
    );
  });
});
