// `npm run bench:cost`: what a request costs the gateway process, against the bare undici
// passthrough, in CPU time (user + system from /proc, all threads) and in req/s. Runs pairs of
// wrk loads back to back (tollgate, then the passthrough) and reports the median of the
// per-pair ratios, so that the machine's drift cancels out. Linux and wrk only.
//
//   BENCH_COST_LIMITS  redis (default) | memory | none   what tollgate checks per request
//   BENCH_COST_LOAD    allowed (default) | flood         flood: one caller far past its limit
//   BENCH_COST_PAIRS (9)  BENCH_COST_SECONDS (2)  BENCH_CONNECTIONS (64)
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const root = new URL("..", import.meta.url).pathname;
const LIMITS = process.env.BENCH_COST_LIMITS ?? "redis";
const FLOOD = (process.env.BENCH_COST_LOAD ?? "allowed") === "flood";
const PAIRS = Number(process.env.BENCH_COST_PAIRS ?? 9);
const SECONDS = Number(process.env.BENCH_COST_SECONDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const children = [];

if (spawnSync("wrk", ["--version"]).error !== undefined) {
  console.error("bench:cost needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}
if (!["redis", "memory", "none"].includes(LIMITS) || (FLOOD && LIMITS === "none")) {
  console.error("BENCH_COST_LIMITS is redis, memory or none (a flood needs a limit)");
  process.exit(2);
}

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function start(name, command, args, ready) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "inherit"], cwd: root });
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

/** CPU seconds (user + system, every thread) a process has used so far. */
function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // clock ticks: USER_HZ is 100 on Linux
}

function load(url, flood) {
  const r = spawnSync(
    "wrk",
    ["-t1", `-c${CONNECTIONS}`, `-d${SECONDS}s`, "-s", join(root, "bench/keys.lua"), url],
    { encoding: "utf8", env: { ...process.env, BENCH_FLOOD: flood ? "1" : "0" } },
  );
  const line = r.stdout.split("\n").find((l) => l.startsWith("BENCH "));
  if (!line) throw new Error(`wrk failed: ${r.stderr}${r.stdout}`);
  return JSON.parse(line.slice(6));
}

/** req/s and CPU µs per request of `pid` while wrk drives `url`. */
function measure(url, pid, flood) {
  const before = cpuSeconds(pid);
  const j = load(url, flood);
  return { rps: j.requests / j.seconds, cpuUs: ((cpuSeconds(pid) - before) * 1e6) / j.requests };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function main() {
  const tmp = mkdtempSync(join(tmpdir(), "tollgate-cost-"));
  let storeUrl = "memory://";
  if (LIMITS === "redis") {
    const port = await freePort();
    await start(
      "redis-server",
      "redis-server",
      ["--port", String(port), "--save", "", "--appendonly", "no"],
      (l) => l.includes("Ready to accept connections"),
    );
    storeUrl = `redis://127.0.0.1:${port}`;
  }
  const upstreamPort = await freePort();
  await start("upstream", process.execPath, [join(root, "bench/upstream.mjs"), String(upstreamPort)], (l) =>
    l.includes("listening"),
  );
  const upstream = `http://127.0.0.1:${upstreamPort}`;
  const clients = Array.from(
    { length: 1000 },
    (_, i) => `  - { id: bench-${i}, key: bench-key-${i}, plan: bench }`,
  );
  const tollgatePort = await freePort();
  writeFileSync(
    join(tmp, "gateway.yaml"),
    `listen: 127.0.0.1:${tollgatePort}
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: ${storeUrl}, timeout: 100ms, on_failure: open }
upstreams: { api: ${upstream} }
clients:
${clients.join("\n")}
  - { id: flood, key: flood-key, plan: flood }
plans:
  bench: ${LIMITS === "none" ? "{}" : "{ global: { rate: 1000000/s, burst: 1000000 } }"}
  flood: { global: { rate: 1/h, burst: 10 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
  );
  const tollgate = await start(
    "tollgate",
    process.execPath,
    [join(root, "dist/cli.js"), "--config", join(tmp, "gateway.yaml")],
    (l) => l.includes("tollgate listening"),
  );
  const passthroughPort = await freePort();
  const passthrough = await start(
    "passthrough",
    process.execPath,
    [join(root, "bench/passthrough.mjs"), String(passthroughPort), upstream],
    (l) => l.includes("listening"),
  );
  const tollgateUrl = `http://127.0.0.1:${tollgatePort}`;
  const passthroughUrl = `http://127.0.0.1:${passthroughPort}`;
  load(tollgateUrl, FLOOD); // warm-up: JIT, pools, Redis scripts
  load(passthroughUrl, false);

  console.log(
    `tollgate (${LIMITS === "none" ? "no limit" : `limits on ${LIMITS}`}, ${FLOOD ? "flood of denials" : "allowed requests"}) against the undici passthrough: ${PAIRS} pairs of ${SECONDS} s, wrk -c${CONNECTIONS}`,
  );
  const rpsRatios = [];
  const cpuRatios = [];
  for (let i = 0; i < PAIRS; i++) {
    const t = measure(tollgateUrl, tollgate.pid, FLOOD);
    const p = measure(passthroughUrl, passthrough.pid, false);
    rpsRatios.push(t.rps / p.rps);
    cpuRatios.push(t.cpuUs / p.cpuUs);
    console.log(
      `  pair ${i + 1}: tollgate ${t.rps.toFixed(0).padStart(6)} req/s ${t.cpuUs.toFixed(0).padStart(4)} µs CPU/req   passthrough ${p.rps.toFixed(0).padStart(6)} req/s ${p.cpuUs.toFixed(0).padStart(4)} µs CPU/req`,
    );
  }
  console.log(
    `\nmedian of pairs: req/s ${median(rpsRatios).toFixed(2)}x the passthrough's, gateway CPU per request ${median(cpuRatios).toFixed(2)}x`,
  );
}

try {
  await main();
} finally {
  for (const c of children) c.kill("SIGKILL");
}
