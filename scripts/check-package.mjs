// `npm run check:package`: what a newcomer gets from `npm install`, checked the way they get it.
//
//   1. a fresh copy of the project (the working tree's files, or `--from-head`: a clone of HEAD)
//      with no dist/ and no node_modules/; `npm ci` there (its prepare builds dist/);
//   2. `npm pack` there: the tarball must hold dist/, the Lua scripts, Envoy's protos (proto/,
//      with their licence), LICENSE, and no source maps, no src/, no tests;
//   3. in an empty project, `npm install ./tollgate-*.tgz`, then:
//      `npx tollgate --check` on a valid config (exit 0) and on a misspelt one (exit 2, "did you
//      mean"); an ESM import and a CommonJS require of "tollgate" that check limits and exit on
//      their own once the store is closed; docs/library.md's library example, with Redis down;
//      "tollgate/gateway" loading a config; "tollgate" loading none of the gateway's dependencies
//      (undici, pino, prom-client) and "tollgate/client" importing nothing; `tsc --noEmit`
//      passing a correct limit definition and the gateway's types, and failing `{ burts: 10 }`;
//   4. unless `--skip-git`: `npm install git+file://…` of the copy, which must build dist/ too.
//
// npm runs with --prefer-offline (the local cache serves what it holds), or with `--offline`
// only from the cache: then a package the cache lacks ends the run with exit 3 ("cannot check
// offline"), not a failure. `--reuse-node-modules` links this checkout's node_modules/ into the
// copy instead of running `npm ci`, and `--reuse-dist` copies this checkout's dist/ (refused
// unless newer than every file of src/) and packs without the prepack build (the quick run of
// test/e2e/package.test.ts, whose setup has just built dist/ from the same src/; it also skips
// the git install). Prints the figures (tarball size, file count, install times); `--json`
// prints them as one JSON line at the end. `--keep` leaves the temporary directory for
// inspection. Exits 1 on the first failed check.
import { execFileSync, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const args = new Set(process.argv.slice(2));
const json = args.has("--json");
const log = (line) => (json ? process.stderr : process.stdout).write(`${line}\n`);

// A child npm must not inherit the npm_* settings of an `npm run` that started this script.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
env.npm_config_update_notifier = "false";
env.npm_config_fund = "false";
env.npm_config_audit = "false";

const work = mkdtempSync(join(tmpdir(), "tollgate-package-"));
const figures = { node: process.version };

function fail(message, detail) {
  log(`FAIL: ${message}`);
  if (detail) log(String(detail).trim());
  log(`(left in ${work})`);
  process.exit(1);
}

function pass(message) {
  log(`ok   ${message}`);
}

/** Runs a command; returns { status, stdout, stderr, seconds }. */
function run(cmd, argv, cwd, options = {}) {
  const started = Date.now();
  const r = spawnSync(cmd, argv, { cwd, env, encoding: "utf8", timeout: options.timeout ?? 240_000 });
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  const out = { status: r.status, signal: r.signal, stdout: r.stdout ?? "", stderr: r.stderr ?? "", seconds };
  if (options.expect !== undefined && r.status !== options.expect) {
    fail(
      `${cmd} ${argv.join(" ")} (in ${cwd}) exited ${r.status ?? r.signal}`,
      `${out.stdout}\n${out.stderr}`,
    );
  }
  return out;
}

const offline = args.has("--offline");
function npm(argv, cwd) {
  const r = run("npm", [...argv, offline ? "--offline" : "--prefer-offline"], cwd);
  if (r.status !== 0 && offline && r.stderr.includes("ENOTCACHED")) {
    log(`cannot check offline: the npm cache lacks a package (npm ${argv[0]})`);
    rmSync(work, { recursive: true, force: true });
    process.exit(3);
  }
  if (r.status !== 0)
    fail(`npm ${argv.join(" ")} (in ${cwd}) exited ${r.status ?? r.signal}`, `${r.stdout}\n${r.stderr}`);
  return r;
}

function filesUnder(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out;
}

const kb = (bytes) => `${(bytes / 1024).toFixed(1)} kB`;

// 1. A fresh copy, then `npm ci`.
const project = join(work, "project");
if (args.has("--from-head")) {
  run("git", ["clone", "--quiet", "--no-hardlinks", root, project], work, { expect: 0 });
  figures.source = "HEAD";
} else {
  const listed = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: root,
    encoding: "utf8",
  });
  for (const file of new Set(listed.split("\0").filter(Boolean))) {
    if (existsSync(join(root, file))) cpSync(join(root, file), join(project, file));
  }
  figures.source = "working tree";
}
if (existsSync(join(project, "dist"))) fail("the fresh copy already has dist/");
if (args.has("--reuse-node-modules")) {
  symlinkSync(join(root, "node_modules"), join(project, "node_modules"), "dir");
  pass(`a fresh copy (${figures.source}), this checkout's node_modules/ linked in`);
} else {
  const ci = npm(["ci"], project);
  figures.npmCiSeconds = ci.seconds;
  if (!existsSync(join(project, "dist/cli.js"))) fail("npm ci did not build dist/ (prepare)", ci.stderr);
  pass(`npm ci in a fresh copy (${figures.source}) built dist/ (${ci.seconds} s)`);
}

// 2. `npm pack`.
const reuseDist = args.has("--reuse-dist");
if (reuseDist) {
  const newest = (path) =>
    statSync(path).isDirectory()
      ? Math.max(0, ...readdirSync(path).map((entry) => newest(join(path, entry))))
      : statSync(path).mtimeMs;
  const cli = join(root, "dist/cli.js");
  if (!existsSync(cli) || statSync(cli).mtimeMs < newest(join(root, "src")))
    fail("--reuse-dist: this checkout's dist/ is missing or older than src/ (npm run build)");
  cpSync(join(root, "dist"), join(project, "dist"), { recursive: true });
  pass("this checkout's dist/ copied in (newer than src/)");
}
const packed = npm(reuseDist ? ["pack", "--json", "--ignore-scripts"] : ["pack", "--json"], project);
figures.npmPackSeconds = packed.seconds;
const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("[")));
const files = info.files.map((f) => f.path);
const tarball = join(project, info.filename);
Object.assign(figures, {
  tarball: info.filename,
  tarballBytes: statSync(tarball).size,
  unpackedBytes: info.unpackedSize,
  fileCount: info.entryCount,
});
for (const needed of [
  "package.json",
  "README.md",
  "LICENSE",
  "dist/cli.js",
  "dist/index.js",
  "dist/index.d.ts",
  "dist/gateway/index.js",
  "dist/gateway/index.d.ts",
  "dist/client/index.js",
  "dist/client/index.d.ts",
  "config/gateway.schema.json",
  // The rate-limit service (rls) loads Envoy's protos at run time, under their own licence.
  "proto/envoy/service/ratelimit/v3/rls.proto",
  "proto/LICENSE",
]) {
  if (!files.includes(needed)) fail(`the tarball lacks ${needed}`, files.join("\n"));
}
if (!files.some((f) => f.startsWith("lua/") && f.endsWith(".lua"))) fail("the tarball lacks the Lua scripts");
const unwanted = files.filter((f) => f.endsWith(".map") || /^(src|test|bench|scripts|\.tmp)\//.test(f));
if (unwanted.length) fail("the tarball holds files it should not", unwanted.join("\n"));
pass(
  `npm pack: ${info.filename}, ${kb(figures.tarballBytes)} (${kb(info.unpackedSize)} unpacked), ` +
    `${info.entryCount} files, no source maps (${packed.seconds} s)`,
);

// 3. An empty project installs the tarball.
const consumer = join(work, "consumer");
mkdirSync(consumer);
writeFileSync(
  join(consumer, "package.json"),
  `${JSON.stringify({ name: "consumer", private: true }, null, 2)}\n`,
);
const install = npm(["install", tarball], consumer);
figures.installTarballSeconds = install.seconds;
const lock = JSON.parse(readFileSync(join(consumer, "node_modules/.package-lock.json"), "utf8"));
const installed = Object.keys(lock.packages).filter((p) => p !== "node_modules/tollgate");
figures.dependencyPackages = installed.length;
figures.dependencyBytes = installed
  .map((p) => join(consumer, p))
  .filter((p) => !installed.some((q) => p !== join(consumer, q) && p.startsWith(join(consumer, q, "/"))))
  .flatMap(filesUnder)
  .reduce((sum, f) => sum + statSync(f).size, 0);
pass(
  `npm install ./${info.filename} in an empty project: tollgate and ${installed.length} dependency packages ` +
    `(${(figures.dependencyBytes / 1024 / 1024).toFixed(1)} MB besides tollgate) in ${install.seconds} s`,
);

const goodConfig = `store: { url: "memory://" }
upstreams:
  api: http://127.0.0.1:3000
plans:
  free:
    global: { rate: 5/s, burst: 10 }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;
// npx runs the project's own bin; without one it would look the name up on the registry.
if (!existsSync(join(consumer, "node_modules/.bin/tollgate"))) fail("the install has no tollgate bin");
writeFileSync(join(consumer, "gateway.yaml"), goodConfig);
writeFileSync(join(consumer, "typo.yaml"), goodConfig.replace("rate: 5/s", "ratee: 5/s"));
const checked = run("npx", ["tollgate", "--check", "--config", "gateway.yaml"], consumer, {
  expect: 0,
});
const typo = run("npx", ["tollgate", "--check", "--config", "typo.yaml"], consumer);
if (typo.status !== 2 || !`${typo.stdout}${typo.stderr}`.includes('did you mean "rate"?')) {
  fail(`tollgate --check on a misspelt config: exit ${typo.status}, not 2 with "did you mean"`, typo.stderr);
}
pass(`npx tollgate --check: exit 0 on a valid config, 2 on a misspelt key (${checked.seconds} s)`);

const library = (load) => `${load}
const store = new MemoryStore();
const limiter = createLimiter({ store, limits: { api: { rate: "5/s", burst: 2 } } });
const allowed = [];
for (let i = 0; i < 3; i++) allowed.push((await limiter.check("alice")).allowed);
await store.close();
console.log(JSON.stringify({ allowed, client: typeof fetchWithRetry }));
`;
writeFileSync(
  join(consumer, "esm.mjs"),
  library(`import { createLimiter, MemoryStore } from "tollgate";
import { fetchWithRetry } from "tollgate/client";`),
);
writeFileSync(
  join(consumer, "cjs.cjs"),
  `(async () => {
${library(`const { createLimiter, MemoryStore } = require("tollgate");
const { fetchWithRetry } = require("tollgate/client");`)}
})();
`,
);
const expected = JSON.stringify({ allowed: [true, true, false], client: "function" });
for (const [kind, file] of [
  ["ESM import", "esm.mjs"],
  ["CommonJS require", "cjs.cjs"],
]) {
  const r = run(process.execPath, [file], consumer, { timeout: 15_000 });
  if (r.signal) fail(`${kind}: the script did not exit on its own after store.close()`);
  if (r.status !== 0 || r.stdout.trim() !== expected)
    fail(`${kind} of "tollgate"`, `${r.stdout}\n${r.stderr}`);
  if (kind === "CommonJS require") figures.requireWarning = r.stderr.includes("ExperimentalWarning");
  pass(`${kind} of "tollgate" and "tollgate/client": checks limits, exits once the store is closed`);
}

// The library example docs/library.md opens with, as written, against a Redis that is not there:
// it must say so, catch the StoreUnavailableError and exit on its own.
const libraryDoc = readFileSync(join(project, "docs/library.md"), "utf8");
const example = /^# As a library\n[\s\S]*?```ts\n([\s\S]*?)```/m.exec(libraryDoc)?.[1];
if (!example?.includes('"redis://127.0.0.1:6379"')) fail("docs/library.md has no library example to run");
const closed = await new Promise((resolve) => {
  const server = createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address();
    server.close(() => resolve(port));
  });
});
writeFileSync(
  join(consumer, "readme-example.mjs"),
  example.replace('"redis://127.0.0.1:6379"', `"redis://127.0.0.1:${closed}"`),
);
const exampleRun = run(process.execPath, ["readme-example.mjs"], consumer, { timeout: 20_000 });
if (exampleRun.signal) fail("the library example of docs/library.md did not exit on its own");
if (exampleRun.status !== 0 || !exampleRun.stderr.includes("Redis is not reachable")) {
  fail("the library example of docs/library.md, Redis down", `${exampleRun.stdout}\n${exampleRun.stderr}`);
}
pass(`docs/library.md's library example exits on its own with Redis down (${exampleRun.seconds} s)`);

// Each entry, as a consumer imports it, with a resolve hook that logs every URL Node resolves:
// "tollgate" is the limiter alone, so it must not load the gateway's dependencies.
writeFileSync(
  join(consumer, "resolve-hook.mjs"),
  `import { appendFileSync } from "node:fs";
let log;
export function initialize(file) { log = file; }
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(log, resolved.url + "\\n");
  return resolved;
}
`,
);
writeFileSync(
  join(consumer, "log-resolutions.mjs"),
  `import { register } from "node:module";
register("./resolve-hook.mjs", import.meta.url, { data: process.env.RESOLVED_LOG });
`,
);
writeFileSync(
  join(consumer, "load-entry.mjs"),
  `const entry = await import(process.argv[2]);
console.log(JSON.stringify(Object.keys(entry).sort()));
`,
);
const GATEWAY_ONLY = ["pino", "prom-client", "undici"];
/** The packages loading `entry` loads (names under node_modules/), and the names it exports. */
function loadEntry(entry) {
  const log = join(consumer, `resolved-${entry.replace("/", "-")}.log`);
  const r = spawnSync(process.execPath, ["--import", "./log-resolutions.mjs", "load-entry.mjs", entry], {
    cwd: consumer,
    env: { ...env, RESOLVED_LOG: log },
    encoding: "utf8",
    timeout: 15_000,
  });
  if (r.status !== 0) fail(`import("${entry}") with a resolve hook`, `${r.stdout}\n${r.stderr}`);
  const urls = existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean) : [];
  const packages = new Set(
    urls
      .map((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1])
      .filter((name) => name !== undefined),
  );
  packages.delete("tollgate");
  return { packages: [...packages].sort(), exports: JSON.parse(r.stdout) };
}
const gateway = loadEntry("tollgate/gateway");
for (const name of [
  "Gateway",
  "loadConfigFile",
  "loadConfigText",
  "compileRuntime",
  "ConfigError",
  "formatProblem",
]) {
  if (!gateway.exports.includes(name))
    fail(`"tollgate/gateway" does not export ${name}`, gateway.exports.join(" "));
}
// The control: were the hook blind, the check of "tollgate" below would pass for nothing.
const unseen = GATEWAY_ONLY.filter((name) => !gateway.packages.includes(name));
if (unseen.length) fail(`the resolve hook did not see "tollgate/gateway" load ${unseen.join(", ")}`);
const limiter = loadEntry("tollgate");
const leaked = GATEWAY_ONLY.filter((name) => limiter.packages.includes(name));
if (leaked.length) fail(`"tollgate" loads the gateway's ${leaked.join(", ")}`, limiter.packages.join(" "));
if (limiter.exports.includes("Gateway")) fail(`"tollgate" still exports Gateway (it is "tollgate/gateway")`);
figures.libraryPackages = limiter.packages;
pass(
  `"tollgate/gateway" exports the Gateway and config loading; "tollgate" loads ` +
    `${limiter.packages.join(", ")}, none of ${GATEWAY_ONLY.join(", ")}`,
);

const clientDir = join(consumer, "node_modules/tollgate/dist/client");
for (const file of readdirSync(clientDir).filter((f) => f.endsWith(".js"))) {
  const source = readFileSync(join(clientDir, file), "utf8");
  for (const [, specifier] of source.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)) {
    if (!specifier.startsWith("./")) fail(`tollgate/client's ${file} imports ${specifier}`);
  }
}
pass("tollgate/client imports nothing outside dist/client");

// TypeScript: the project's own compiler and Node types, so no download.
const tsc = join(project, "node_modules/typescript/bin/tsc");
const tsOptions = {
  compilerOptions: {
    strict: true,
    noEmit: true,
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    skipLibCheck: true,
    types: ["node"],
    typeRoots: [join(project, "node_modules/@types")],
  },
};
const tsCase = (name, limits) => {
  writeFileSync(
    join(consumer, `${name}.mts`),
    `import { createLimiter, MemoryStore } from "tollgate";
const store = new MemoryStore();
const limiter = createLimiter({ store, limits: ${limits} });
export const decision = await limiter.check("alice");
`,
  );
  writeFileSync(
    join(consumer, `tsconfig.${name}.json`),
    JSON.stringify({ ...tsOptions, files: [`${name}.mts`] }),
  );
  return run(process.execPath, [tsc, "-p", `tsconfig.${name}.json`], consumer);
};
const good = tsCase(
  "good",
  `{ api: { rate: "5/s", burst: 10 }, login: { algorithm: "sliding_window", limit: 5, window: "15m" } }`,
);
if (good.status !== 0) fail("tsc rejects a correct limit definition", good.stdout);
const bad = tsCase("bad", `{ api: { rate: "5/s", burts: 10 } }`);
if (bad.status === 0 || !bad.stdout.includes("burts")) fail("tsc accepts { burts: 10 }", bad.stdout);
figures.tscMisspelling = bad.stdout.trim().split("\n")[0];
pass(`tsc --noEmit: a correct definition passes, { burts: 10 } fails:\n     ${figures.tscMisspelling}`);
writeFileSync(
  join(consumer, "gateway.mts"),
  `import { type Config, Gateway, type GatewayOptions, loadConfigText } from "tollgate/gateway";
const options: GatewayOptions = { configFile: "gateway.yaml" };
export const gateway: Promise<Gateway> = Gateway.start(options);
const loaded = loadConfigText("", "gateway.yaml", {});
export const config: Config | undefined = loaded.ok ? loaded.config : undefined;
`,
);
writeFileSync(
  join(consumer, "tsconfig.gateway.json"),
  JSON.stringify({ ...tsOptions, files: ["gateway.mts"] }),
);
const gatewayTypes = run(process.execPath, [tsc, "-p", "tsconfig.gateway.json"], consumer);
if (gatewayTypes.status !== 0) fail(`tsc rejects the types of "tollgate/gateway"`, gatewayTypes.stdout);
pass(`tsc --noEmit: "tollgate/gateway" has its types`);

// 4. A git install: npm clones, installs the dev dependencies, runs prepare, then packs.
if (!args.has("--skip-git")) {
  if (!existsSync(join(project, ".git"))) {
    const git = (argv) => run("git", argv, project, { expect: 0 });
    git(["init", "--quiet"]);
    git(["add", "--all"]);
    git(["-c", "user.name=check", "-c", "user.email=check@localhost", "commit", "--quiet", "-m", "snapshot"]);
  }
  const gitConsumer = join(work, "git-consumer");
  mkdirSync(gitConsumer);
  writeFileSync(
    join(gitConsumer, "package.json"),
    `${JSON.stringify({ name: "git-consumer", private: true })}\n`,
  );
  const gitInstall = npm(["install", `git+file://${project}`], gitConsumer);
  figures.installGitSeconds = gitInstall.seconds;
  const gitFiles = filesUnder(join(gitConsumer, "node_modules/tollgate")).map((f) =>
    relative(join(gitConsumer, "node_modules/tollgate"), f),
  );
  if (!gitFiles.includes("dist/index.js")) fail("npm install git+file://… gave a package without dist/");
  if (!existsSync(join(gitConsumer, "node_modules/.bin/tollgate")))
    fail("the git install has no tollgate bin");
  writeFileSync(join(gitConsumer, "gateway.yaml"), goodConfig);
  run("npx", ["tollgate", "--check", "--config", "gateway.yaml"], gitConsumer, { expect: 0 });
  pass(`npm install git+file://… built dist/ and installed the bin (${gitInstall.seconds} s)`);
}

if (args.has("--keep")) log(`left in ${work}`);
else rmSync(work, { recursive: true, force: true });
log(
  `figures: tarball ${kb(figures.tarballBytes)}, ${figures.fileCount} files; ` +
    (figures.npmCiSeconds === undefined ? "" : `npm ci ${figures.npmCiSeconds} s, `) +
    `npm pack ${figures.npmPackSeconds} s, tarball install ${figures.installTarballSeconds} s` +
    (figures.installGitSeconds === undefined ? "" : `, git install ${figures.installGitSeconds} s`),
);
if (json) process.stdout.write(`${JSON.stringify(figures)}\n`);
