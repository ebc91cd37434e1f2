// What the bench scripts share: free ports, child processes started and killed together, a
// private redis-server, the upstream, the gateway's bench config, the passthrough, and wrk.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

export const root = new URL("..", import.meta.url).pathname;
export const KEYS = 1000;

const children = [];

export function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Starts a process and resolves once a stdout line satisfies `ready`. */
export function start(name, command, args, ready, cwd = root) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "inherit"], cwd });
  children.push(child);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start`)), 15_000);
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (ready(line)) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on("exit", (code) => reject(new Error(`${name} exited with ${code}`)));
  });
}

/** Kills every process `start` started: call it in a `finally`. */
export function killAll() {
  for (const c of children) c.kill("SIGKILL");
}

/**
 * A redis-server of its own that persists nothing, in a dir of its own (a replica's full sync
 * writes dump.rdb even with save ""); `extra` adds settings. Resolves with its URL.
 */
export async function startRedis(extra = []) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "tollgate-bench-redis-"));
  await start(
    "redis-server",
    "redis-server",
    ["--port", String(port), "--dir", dir, "--save", "", "--appendonly", "no", ...extra],
    (l) => l.includes("Ready to accept connections"),
  );
  return `redis://127.0.0.1:${port}`;
}

/** The upstream every target forwards to (bench/upstream.mjs); resolves with its URL. */
export async function startUpstream() {
  const port = await freePort();
  await start("upstream", process.execPath, [join(root, "bench/upstream.mjs"), String(port)], (l) =>
    l.includes("listening"),
  );
  return `http://127.0.0.1:${port}`;
}

/**
 * A proxy script of bench/ (the passthrough, a peer) on a free port, in front of `upstream`:
 * `node [nodeArgs] <script> <port> <upstream> [...more]`, ready once it prints "listening".
 */
export async function startProxyScript(name, script, upstream, more = [], nodeArgs = [], cwd = root) {
  const port = await freePort();
  const child = await start(
    name,
    process.execPath,
    [...nodeArgs, join(root, script), String(port), upstream, ...more],
    (l) => l.includes("listening"),
    cwd,
  );
  return { child, url: `http://127.0.0.1:${port}` };
}

/** The bare undici passthrough in front of `upstream` (`nodeArgs`: Node flags, bench/profile.mjs). */
export function startPassthrough(upstream, nodeArgs = [], cwd = root) {
  return startProxyScript("passthrough", "bench/passthrough.mjs", upstream, [], nodeArgs, cwd);
}

/** The floor peer (bench/floor-peer.mjs) in front of `upstream`, on the Redis at `redisUrl`. */
export function startFloor(upstream, redisUrl, nodeArgs = [], cwd = root) {
  return startProxyScript("floor", "bench/floor-peer.mjs", upstream, [redisUrl], nodeArgs, cwd);
}

/**
 * The bench gateway's config file, listening on `port`: KEYS API keys on a plan that never
 * denies, with two token buckets per caller (its global limit and one on the route; or no limit
 * at all with `limited: false`), both header styles, and `flood-key`, far past its limit after
 * 10. Returns its path.
 */
export function writeBenchGatewayConfig({
  port,
  storeUrl,
  upstream,
  workers = 1,
  limited = true,
  storeExtra = "",
  /** Top-level YAML appended to the config (bench:cost's `telemetry:`). */
  extra = "",
}) {
  const clients = Array.from(
    { length: KEYS },
    (_, i) => `  - { id: bench-${i}, key: bench-key-${i}, plan: bench }`,
  );
  const config = join(mkdtempSync(join(tmpdir(), "tollgate-bench-")), "gateway.yaml");
  writeFileSync(
    config,
    `listen: 127.0.0.1:${port}
admin: { listen: 127.0.0.1:0 }
workers: ${workers}
log: { level: info, requests: false }
headers: [draft, ietf]
store: { url: ${storeUrl}, timeout: 100ms, on_failure: open${storeExtra} }
upstreams: { api: ${upstream} }
clients:
${clients.join("\n")}
  - { id: flood, key: flood-key, plan: flood }
plans:
  bench: ${limited ? "{ global: { rate: 1000000/s, burst: 1000000 }, routes: { default: { rate: 1000000/s, burst: 1000000 } } }" : "{}"}
  flood: { global: { rate: 1/h, burst: 10 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
${extra}`,
  );
  return config;
}

/** A gateway (dist/cli.js) with the bench's config (writeBenchGatewayConfig) on a free port. */
export async function startBenchGateway({ name = "tollgate", cwd = root, ...settings }) {
  const port = await freePort();
  const config = writeBenchGatewayConfig({ port, ...settings });
  // BENCH_GATEWAY_NODE_ARGS: Node flags for the gateway alone (bench/profile.mjs: --cpu-prof).
  // BENCH_GATEWAY_CLI: another build's cli.js, to compare two builds in one run.
  const nodeArgs = (process.env.BENCH_GATEWAY_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const cli = process.env.BENCH_GATEWAY_CLI ?? join(root, "dist/cli.js");
  const child = await start(
    name,
    process.execPath,
    [...nodeArgs, cli, "--config", config],
    (l) => l.includes("tollgate listening"),
    cwd,
  );
  return { child, url: `http://127.0.0.1:${port}` };
}

export const hasWrk = spawnSync("wrk", ["--version"]).error === undefined;

/**
 * One wrk run against `url` with bench/keys.lua (the KEYS API keys round-robin, or with `flood`
 * every request as flood-key; with `delayMs`, each connection waits that long between its
 * requests: a paced load): its summary line, parsed.
 */
export function wrk(url, seconds, connections, flood = false, delayMs = 0) {
  const r = spawnSync(
    "wrk",
    ["-t1", `-c${connections}`, `-d${seconds}s`, "-s", join(root, "bench/keys.lua"), url],
    {
      encoding: "utf8",
      env: { ...process.env, BENCH_FLOOD: flood ? "1" : "0", BENCH_DELAY_MS: String(delayMs) },
    },
  );
  const line = r.stdout.split("\n").find((l) => l.startsWith("BENCH "));
  if (!line) throw new Error(`wrk failed: ${r.stderr}${r.stdout}`);
  return JSON.parse(line.slice(6));
}

/** CPU seconds (user + system, every thread) `pid` and its child processes have used so far. */
export function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  let seconds = (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    let children = "";
    try {
      children = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8");
    } catch {
      continue; // the thread ended while we looked
    }
    for (const child of children.split(" ").filter(Boolean)) seconds += cpuSeconds(Number(child));
  }
  return seconds;
}

/** Redis's CPU seconds so far (user + system, every thread) and the scripts clients sent it. */
export async function redisCounters(redis) {
  const cpu = await redis.info("cpu");
  const seconds =
    Number(/used_cpu_sys:([\d.]+)/.exec(cpu)[1]) + Number(/used_cpu_user:([\d.]+)/.exec(cpu)[1]);
  let scripts = 0;
  for (const m of (await redis.info("commandstats")).matchAll(/cmdstat_(evalsha|eval|fcall):calls=(\d+)/g))
    scripts += Number(m[2]);
  return { seconds, scripts };
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** A self-signed P-256 certificate for localhost and 127.0.0.1 in `dir` (tls.crt, tls.key), valid one day. */
export function selfSignedCert(dir) {
  const cert = join(dir, "tls.crt");
  const key = join(dir, "tls.key");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
    ],
    { stdio: "ignore" },
  );
  return { cert, key };
}
