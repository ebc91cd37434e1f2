// Writes the package's figures (tarball size, file count, unpacked size) into the docs that state
// them, between <!-- package-figures --> and <!-- /package-figures -->, from what
// `npm pack --dry-run --json` says the tarball holds. `npm run docs` runs it after the build;
// test/e2e/package-figures.test.ts fails when a page's figures are off by more than a quarter.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

export const PAGES = ["docs/getting-started.md"];
export const FIGURES = /<!-- package-figures -->([\s\S]*?)<!-- \/package-figures -->/g;

/** `npm pack --dry-run --json` of the working tree, without its prepack build. */
export function packInfo(cwd = new URL("..", import.meta.url).pathname) {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  const [info] = JSON.parse(out);
  return { bytes: info.size, files: info.entryCount, unpackedBytes: info.unpackedSize };
}

/** Two significant digits: figures that move with every change should not move the docs. */
const round2 = (n) => {
  const scale = 10 ** Math.max(0, Math.floor(Math.log10(n)) - 1);
  return Math.round(n / scale) * scale;
};

export function figuresText({ bytes, files, unpackedBytes }) {
  return `about ${round2(bytes / 1000)} kB and ${round2(files)} files, ${(unpackedBytes / 1e6).toFixed(1)} MB unpacked`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const text = figuresText(packInfo());
  for (const page of PAGES) {
    const file = new URL(`../${page}`, import.meta.url);
    const before = readFileSync(file, "utf8");
    const after = before.replace(FIGURES, `<!-- package-figures -->${text}<!-- /package-figures -->`);
    if (after === before && !before.includes(text))
      throw new Error(`${page} has no package figures to write`);
    writeFileSync(file, after);
  }
  console.log(`package figures: ${text}`);
}
