// The package's figures that the docs state (tarball size, file count, unpacked size) are written
// by scripts/write-package-figures.mjs (`npm run docs`); this holds them to what
// `npm pack --dry-run` says now, within a quarter, so a page never states a stale size
// (test/unit/docs-stand-alone.test.ts refuses one stated outside such a block). In the e2e
// project: its global setup has just built dist/, which is most of the tarball.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { FIGURES, PAGES, packInfo } from "../../scripts/write-package-figures.mjs";

const root = new URL("../../", import.meta.url);
const within = (stated: number, actual: number) => Math.abs(stated - actual) <= actual / 4;

describe("the package figures the docs state", () => {
  const actual = packInfo(root.pathname);

  it.each(PAGES)("%s states the tarball's size, file count and unpacked size within a quarter", (page) => {
    const text = readFileSync(new URL(page, root), "utf8");
    const blocks = [...text.matchAll(FIGURES)].map((m) => m[1]!);
    expect(blocks.length, "a <!-- package-figures --> block").toBeGreaterThan(0);
    for (const block of blocks) {
      const m = /^about ([\d.]+) kB and (\d+) files, ([\d.]+) MB unpacked$/.exec(block);
      expect(m, block).not.toBeNull();
      const [kb, files, mb] = [Number(m![1]), Number(m![2]), Number(m![3])];
      expect(within(kb * 1000, actual.bytes), `${kb} kB against ${actual.bytes} bytes`).toBe(true);
      expect(within(files, actual.files), `${files} files against ${actual.files}`).toBe(true);
      expect(within(mb * 1e6, actual.unpackedBytes), `${mb} MB against ${actual.unpackedBytes} bytes`).toBe(
        true,
      );
    }
  });
});
