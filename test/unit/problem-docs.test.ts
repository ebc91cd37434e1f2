// docs/problems.md is generated from the problem table (src/http/problem.ts) by
// scripts/write-problem-docs.mjs; this fails when it is stale (run `npm run docs`), as
// config-docs.test.ts does for docs/configuration.md.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { problemReference } from "../../scripts/problem-docs.mjs";
import { PROBLEMS } from "../../src/http/problem.js";

const source = readFileSync(new URL("../../src/http/problem.ts", import.meta.url), "utf8");
const committed = readFileSync(new URL("../../docs/problems.md", import.meta.url), "utf8");
const generated = problemReference(PROBLEMS, source);

describe("docs/problems.md", () => {
  it("matches the problem table (run `npm run docs` after changing src/http/problem.ts)", () => {
    expect(committed).toBe(generated);
  });

  it("has one row per code, under the section its comment in the table opens", () => {
    const rows = generated.split("\n").filter((l) => /^\| `[a-z-]+` /.test(l));
    expect(rows.length).toBe(Object.keys(PROBLEMS).length);
    const admin = generated.indexOf("## The admin API's own");
    expect(admin).toBeGreaterThan(0);
    expect(generated.indexOf("| `quota-exceeded` ")).toBeLessThan(admin);
    expect(generated.indexOf("| `admin-disabled` ")).toBeGreaterThan(admin);
  });

  it("says for every code when it is answered: the table's comment, or the generator's line", () => {
    const empty = generated.split("\n").filter((l) => /^\| `[a-z-]+` .*\|\s+\|$/.test(l));
    expect(empty).toEqual([]);
    // The table's own comment is what the page says.
    expect(generated).toContain("The limit store cannot decide and the route fails closed.");
  });

  it("refuses a table whose text it cannot read, rather than leaving a code out", () => {
    expect(() => problemReference({ ...PROBLEMS, not_in_text: PROBLEMS.bad_path }, source)).toThrow(
      /not_in_text/,
    );
  });
});
