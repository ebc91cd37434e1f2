// docs/providers.md shows each recipe's config file as it is: the file the recipe test runs
// (test/integration/provider-recipes.test.ts), so the page cannot drift from what was tried.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";

const root = new URL("../../", import.meta.url);
const doc = readFileSync(new URL("docs/providers.md", root), "utf8");
// The recipes are the page's sections; the opening's short example is no recipe.
const recipes = doc.slice(doc.indexOf("\n## "));
const blocks = [...recipes.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]);

describe("docs/providers.md", () => {
  it("holds each recipe's config file byte for byte, in order", () => {
    const files = ["openai.yaml", "anthropic.yaml", "self-hosted.yaml"].map((f) =>
      readFileSync(new URL(`config/examples/${f}`, root), "utf8"),
    );
    expect(blocks).toEqual(files);
  });

  it("each is a valid config without warnings once its secrets are set", () => {
    for (const text of blocks) {
      const loaded = loadConfigText(text!, "recipe.yaml", {
        ADMIN_TOKEN: "t",
        OPENAI_API_KEY: "sk",
        ANTHROPIC_API_KEY: "sk",
      });
      expect(loaded.ok && loaded.warnings).toEqual([]);
    }
  });
});
