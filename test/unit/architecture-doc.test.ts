// docs/architecture.md is the map a newcomer reads first: every file path it names must exist,
// and every room under src/ must have its paragraph.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const DOC = readFileSync(`${ROOT}docs/architecture.md`, "utf8");

describe("docs/architecture.md", () => {
  it("names only files and folders that exist", () => {
    const paths = [...DOC.matchAll(/`((?:src|lua|test|docs|config)\/[^`\s<>]*)`/g)].map((m) => m[1]!);
    expect(paths.length).toBeGreaterThan(10);
    expect(paths.filter((p) => !existsSync(ROOT + p))).toEqual([]);
  });

  it("has a paragraph for every room under src/", () => {
    const rooms = readdirSync(`${ROOT}src`, { withFileTypes: true })
      .filter((e) => e.isDirectory() && e.name !== "types")
      .map((e) => e.name);
    expect(rooms.filter((room) => !DOC.includes(`**\`src/${room}/\`**`))).toEqual([]);
  });
});
