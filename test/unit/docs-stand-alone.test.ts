// Issue 20.9: the project's docs are the contract and stand alone. Every relative link in the
// README and docs/ names a file of this repository, and none sends the reader to a document
// that is not in it (the SPEC the team works from lives outside the repository).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { PROBLEMS } from "../../src/http/problem.js";

const root = new URL("../..", import.meta.url).pathname;
const docs = ["README.md", ...readdirSync(join(root, "docs")).map((f) => `docs/${f}`)].filter((f) =>
  f.endsWith(".md"),
);

describe("the docs stand alone", () => {
  it.each(docs)("%s links only to files of this repository", (file) => {
    const text = readFileSync(join(root, file), "utf8");
    const broken: string[] = [];
    for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
      if (/^[a-z]+:/i.test(target!)) continue; // an external URL
      if (!existsSync(join(root, dirname(file), target!))) broken.push(target!);
    }
    expect(broken).toEqual([]);
  });

  it.each(docs)("%s never sends the reader to a SPEC or other document outside the repository", (file) => {
    const text = readFileSync(join(root, file), "utf8");
    expect(text).not.toMatch(/\bSPEC\b|shared\/|ARCHITECTURE\.md|STYLE\.md/);
  });
});

describe("the README names every problem type the gateway answers with", () => {
  it.each(Object.keys(PROBLEMS))("%s", (code) => {
    expect(readFileSync(join(root, "README.md"), "utf8")).toContain(`\`${code.replace(/_/g, "-")}\``);
  });
});
