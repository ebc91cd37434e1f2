// Tracing off costs nothing: no module the gateway loads imports OpenTelemetry statically. Only
// observability/otel-tracing.ts may name `@opentelemetry/*`, and it is reached only through the
// dynamic import in observability/tracing.ts (taken when telemetry.traces is configured). The
// spawned-process proof is test/e2e/tracing.test.ts ("telemetry absent"); this is the second
// line, failing at once when a static import creeps in.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));
const OTEL = "observability/otel-tracing.ts";
const LOADER = "observability/tracing.ts";

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith(".ts") ? [full] : [];
  });
}

const FILES = new Map(
  sourceFiles(SRC).map((file) => [path.relative(SRC, file), readFileSync(file, "utf8")] as const),
);

/** Static imports and re-exports (`import … from "x"`, `import "x"`, `export … from "x"`). */
function staticSpecifiers(text: string): string[] {
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b(?:[^;"']*?\bfrom\s+)?\s*["']([^"']+)["']/g)].map(
    (m) => m[1]!,
  );
}

/** Dynamic imports: `import("x")`. */
function dynamicSpecifiers(text: string): string[] {
  return [...text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]!);
}

function resolve(from: string, specifier: string): string | null {
  if (!specifier.startsWith(".")) return null;
  return path
    .relative(SRC, path.resolve(path.dirname(path.join(SRC, from)), specifier))
    .replace(/\.js$/, ".ts");
}

/** Every src/ module `entry` reaches by static and dynamic imports, but `except`'s dynamic ones. */
function reachable(entry: string, except: { file: string; target: string } | null): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file) || !FILES.has(file)) return;
    seen.add(file);
    const text = FILES.get(file)!;
    for (const s of staticSpecifiers(text)) {
      const target = resolve(file, s);
      if (target) visit(target);
    }
    for (const s of dynamicSpecifiers(text)) {
      const target = resolve(file, s);
      if (target && !(except && file === except.file && target === except.target)) visit(target);
    }
  };
  visit(entry);
  return seen;
}

describe("OpenTelemetry is loaded only when tracing is configured", () => {
  it("only otel-tracing.ts imports @opentelemetry (and it does: this check is not vacuous)", () => {
    const importers = [...FILES]
      .filter(([, text]) =>
        [...staticSpecifiers(text), ...dynamicSpecifiers(text)].some((s) => s.startsWith("@opentelemetry/")),
      )
      .map(([file]) => file);
    expect(importers).toEqual([OTEL]);
  });

  it("the CLI reaches otel-tracing.ts only through tracing.ts's dynamic import", () => {
    // Every module the CLI can load, the gateway included (it is itself a dynamic import).
    expect(reachable("cli.ts", null)).toContain(OTEL);
    const without = reachable("cli.ts", { file: LOADER, target: OTEL });
    expect(without).toContain("gateway/gateway.ts");
    expect(without).toContain("proxy/pipeline.ts");
    expect(without).not.toContain(OTEL);
  });

  it("nothing imports otel-tracing.ts statically, types included", () => {
    const importers = [...FILES]
      .filter(([file, text]) => staticSpecifiers(text).some((s) => resolve(file, s) === OTEL))
      .map(([file]) => file);
    expect(importers).toEqual([]);
  });
});
