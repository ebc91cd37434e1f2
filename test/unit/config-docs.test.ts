// docs/configuration.md is generated from the schema; this fails when it is stale (run
// `npm run docs`), and the generator itself refuses a key with neither a default nor an example.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { configReference, MINIMAL_CONFIG } from "../../src/config/docs.js";
import { loadConfigText } from "../../src/config/load.js";
import { jsonSchema } from "../../src/config/schema.js";

describe("docs/configuration.md", () => {
  const loaded = loadConfigText(MINIMAL_CONFIG, "minimal.yaml", {});
  if (!loaded.ok) throw new Error("the minimal config must load");
  const generated = configReference(jsonSchema() as never, loaded.config);

  it("matches the schema (run `npm run docs` after changing src/config/schema.ts)", () => {
    const committed = readFileSync(new URL("../../docs/configuration.md", import.meta.url), "utf8");
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
});
