// Builds dist/ for npm's lifecycle, so that every way of getting tollgate has it:
//
//   prepare  (`npm install` / `npm ci` in a clone, `npm install git+…`, `npm pack`)
//            builds when dist/ is missing or older than src/, else does nothing;
//   prepack  (`npm pack`, `npm publish`: `--force`) always builds, from scratch, so the
//            tarball holds exactly what src/ compiles to (no stale files, no old source maps).
//
// A build compiles into .tmp/ and then replaces dist/ in two renames, so a dist/cli.js that is
// running or being tested is never half-written. Where there is nothing to build (no src/: an
// installed package) it does nothing. Without TypeScript (`npm ci --omit=dev`) prepare warns and
// succeeds, while prepack fails: a production install must not break, a tarball must not lack
// dist/. npm runs the script only through the guard in package.json, which skips it when
// scripts/ is absent (the Dockerfile installs from package.json alone before copying sources).
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const force = process.argv.includes("--force");
const say = (message) => console.error(`tollgate: ${message}`);

function newestMtime(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = 0;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

function fresh() {
  const cli = join(root, "dist/cli.js");
  if (!existsSync(cli)) return false;
  const inputs = ["src", "tsconfig.json", "tsconfig.build.json"].map((p) => join(root, p));
  return Math.max(...inputs.filter(existsSync).map(newestMtime)) <= statSync(cli).mtimeMs;
}

function typescriptCompiler() {
  try {
    return createRequire(join(root, "package.json")).resolve("typescript/bin/tsc");
  } catch {
    return undefined;
  }
}

function build(tsc) {
  const tmp = join(root, ".tmp");
  mkdirSync(tmp, { recursive: true });
  const next = join(tmp, `dist-${process.pid}`);
  const previous = join(tmp, `dist-old-${process.pid}`);
  rmSync(next, { recursive: true, force: true });
  const started = Date.now();
  const compiled = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json", "--outDir", next], {
    cwd: root,
    stdio: "inherit",
  });
  if (compiled.status !== 0) {
    rmSync(next, { recursive: true, force: true });
    say("the build failed (tsc -p tsconfig.build.json)");
    process.exit(compiled.status ?? 1);
  }
  chmodSync(join(next, "cli.js"), 0o755);
  const dist = join(root, "dist");
  if (existsSync(dist)) renameSync(dist, previous);
  renameSync(next, dist);
  rmSync(previous, { recursive: true, force: true });
  say(`built dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

if (!existsSync(join(root, "src/index.ts")) || !existsSync(join(root, "tsconfig.build.json"))) {
  // An installed copy of the package: dist/ is what it ships.
} else if (!force && fresh()) {
  // dist/ is newer than everything it is built from.
} else {
  const tsc = typescriptCompiler();
  if (tsc) build(tsc);
  else if (force) {
    say("cannot build dist/ for the package: TypeScript is not installed (run npm install first)");
    process.exit(1);
  } else {
    say(
      existsSync(join(root, "dist/cli.js"))
        ? "dist/ is older than src/ but TypeScript is not installed (--omit=dev?): run npm install, then npm run build"
        : "dist/ is not built and TypeScript is not installed (--omit=dev?): run npm install, then npm run build",
    );
  }
}
