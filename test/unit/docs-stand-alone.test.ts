// Issue 20.9: the project's docs are the contract and stand alone. Every relative link in the
// README and docs/ names a file of this repository (and a heading of it, when it names one), none
// sends the reader to a document that is not in it (the SPEC the team works from lives outside the
// repository), and every page of docs/ is reachable from its table of contents, docs/README.md.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { PROBLEMS } from "../../src/http/problem.js";

const root = new URL("../..", import.meta.url).pathname;
const pages = readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md"));
const docs = ["README.md", ...pages.map((f) => `docs/${f}`)];
const read = (file: string) => readFileSync(join(root, file), "utf8");

/** Relative links of a markdown page: [text](target#fragment), outside code blocks. */
function links(text: string): { target: string; fragment: string | undefined }[] {
  const prose = text.replace(/^```[\s\S]*?^```/gm, "");
  return [...prose.matchAll(/\]\(([^)#\s]*)(?:#([^)\s]*))?\)/g)]
    .filter(([, target]) => !/^[a-z]+:/i.test(target!))
    .map(([, target, fragment]) => ({ target: target!, fragment }));
}

/** GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as dashes. */
function anchors(text: string): Set<string> {
  const prose = text.replace(/^```[\s\S]*?^```/gm, "");
  const out = new Set<string>();
  for (const [, heading] of prose.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = heading!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/ /g, "-");
    let anchor = base;
    for (let n = 1; out.has(anchor); n++) anchor = `${base}-${n}`;
    out.add(anchor);
  }
  return out;
}

describe("the docs stand alone", () => {
  it.each(docs)("%s links only to files of this repository, and to headings they have", (file) => {
    const text = read(file);
    const broken: string[] = [];
    for (const { target, fragment } of links(text)) {
      const path = target === "" ? file : normalize(join(dirname(file), target));
      if (!existsSync(join(root, path))) broken.push(target);
      else if (fragment !== undefined && path.endsWith(".md") && !anchors(read(path)).has(fragment))
        broken.push(`${target}#${fragment}`);
    }
    expect(broken).toEqual([]);
  });

  it.each(docs)("%s never sends the reader to a SPEC or other document outside the repository", (file) => {
    const text = read(file);
    expect(text).not.toMatch(/\bSPEC\b|shared\/|ARCHITECTURE\.md|STYLE\.md/);
  });

  it("links every page of docs/ from its table of contents, docs/README.md", () => {
    const listed = new Set(links(read("docs/README.md")).map((l) => normalize(l.target)));
    expect(pages.filter((p) => p !== "README.md" && !listed.has(p))).toEqual([]);
  });

  it("every page of docs/ says what it is for and shows a minimal example before its first section", () => {
    // configuration.md is generated (src/config/docs.ts), and opens with its minimal file.
    const bare = pages.filter((page) => {
      if (page === "configuration.md") return false;
      const text = read(`docs/${page}`);
      const opening = text.split(/^## /m)[0]!;
      const intro = opening.split("\n").slice(1).join("\n").trim();
      return !/^#\s/.test(text) || !/^[A-Z<[`]/.test(intro) || !/```/.test(opening);
    });
    expect(bare).toEqual([]);
  });

  it("keeps the README a front page: at most about 300 lines, linking the table of contents", () => {
    const readme = read("README.md");
    expect(readme.split("\n").length).toBeLessThanOrEqual(310);
    expect(readme).toContain("](docs/README.md)");
  });

  it("runs no bare `tollgate` in a command: it is not on PATH in a clone", () => {
    const bare: string[] = [];
    for (const file of docs) {
      if (file === "docs/configuration.md") continue; // generated from src/config/docs.ts
      for (const [, line] of read(file).matchAll(
        /^(?:\$ )?(tollgate (?:keys|overrides|usage|--check)[^\n]*)$/gm,
      ))
        bare.push(`${file}: ${line}`);
      for (const [, cmd] of read(file).matchAll(/(?<![\w/-])`(tollgate (?:keys|overrides|usage|--)[^`]*)`/g))
        bare.push(`${file}: ${cmd}`);
    }
    expect(bare).toEqual([]);
  });
});

describe("the README's commands", () => {
  it("states `npm test` as the test command, the one CI (.ci/run) runs", () => {
    const readme = read("README.md");
    expect(readme).toMatch(/Run the tests:\n\n```sh\nnpm test\n```/);
    const ci = read(".ci/run").trim().split("\n");
    expect(ci.at(-1)).toBe("npm test");
    // The unit suite alone, as the README gives it, is a script running the projects
    // vitest.config.ts defines.
    expect(readme).toContain("npm run test:unit\n");
    const scripts = JSON.parse(read("package.json")).scripts as Record<string, string>;
    expect(scripts["test:unit"]).toBe("vitest run --project unit --project unit-fresh");
    expect(read("vitest.config.ts")).toContain('name: "unit"');
    expect(read("vitest.config.ts")).toContain('name: "unit-fresh"');
  });
});

describe("figures the docs state about the package and its tests", () => {
  // Written by scripts (write-package-figures.mjs, write-test-times.mjs) between markers; a
  // figure outside them would go stale unnoticed. test/e2e/package-figures.test.ts holds the
  // package figures to `npm pack --dry-run`.
  const unmarked = (file: string) =>
    read(file).replace(/<!-- (package-figures|unit-time|suite-time) -->[\s\S]*?<!-- \/\1 -->/g, "");

  it.each(docs)("%s states tarball and install sizes only where a script writes them", (file) => {
    const text = unmarked(file);
    expect(text).not.toMatch(/\d+(\.\d+)? ?(kB|MB)\b[^\n.]*\b(tarball|files in|install|node_modules)/);
    expect(text).not.toMatch(/\b(tarball|npm pack|installs?)\b[^\n.]*\b\d+(\.\d+)? ?(kB|MB)\b/);
    expect(text).not.toMatch(/\b\d+ packages\b/);
  });

  it("the README states the test suites' times only where scripts/write-test-times.mjs writes them", () => {
    const readme = read("README.md");
    for (const marker of ["unit-time", "suite-time"])
      expect(readme).toMatch(new RegExp(`<!-- ${marker} -->about [\\d–]+ (s|minutes)<!-- /${marker} -->`));
    const time = /\b\d+(\.\d+)?(–\d+)? ?(seconds|minutes|min)\b|\b\d+(\.\d+)? s\b/;
    expect(unmarked("README.md")).not.toMatch(time);
    // The soak's 60 s is its setting (SOAK_SECONDS), not a measured time.
    expect(unmarked("docs/development.md")).not.toMatch(/\babout \d+(\.\d+)? ?(s|seconds|min|minutes)\b|~\d/);
  });
});

describe("docs/problems.md names every problem type the gateway answers with", () => {
  it.each(Object.entries(PROBLEMS))("%s", (code, entry) => {
    const row = read("docs/problems.md")
      .split("\n")
      .find((l) => l.startsWith(`| \`${code.replace(/_/g, "-")}\` `));
    expect(row).toBeDefined();
    expect(row).toContain(`| ${entry.status} ${entry.title} `);
    expect(row).toContain(`\`${entry.type}\``);
  });
});
