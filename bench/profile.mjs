// `npm run bench:profile`: a CPU profile of the gateway under the bench's load (1000 API keys,
// limits on Redis, wrk -c64), and where its time goes: the functions and files with the most
// self time. For the cost-per-request work: profile, change one thing, profile again.
//
//   BENCH_PROFILE_SECONDS (8)  BENCH_CONNECTIONS (64)  BENCH_PROFILE_DIR (a temporary folder)
import { once } from "node:events";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hasWrk, killAll, startBenchGateway, startRedis, startUpstream, wrk } from "./support.mjs";

const SECONDS = Number(process.env.BENCH_PROFILE_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const dir = process.env.BENCH_PROFILE_DIR ?? mkdtempSync(join(tmpdir(), "tollgate-profile-"));

if (!hasWrk) {
  console.error("bench:profile needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}

// The gateway writes its profile when it exits, so it is stopped with SIGTERM, not killed.
process.env.BENCH_GATEWAY_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${dir}`;
try {
  const storeUrl = await startRedis();
  const upstream = await startUpstream();
  const gateway = await startBenchGateway({ storeUrl, upstream });
  wrk(gateway.url, 2, CONNECTIONS); // warm-up, in the profile too
  const load = wrk(gateway.url, SECONDS, CONNECTIONS);
  console.log(
    `${load.requests} requests in ${load.seconds} s (${Math.round(load.requests / load.seconds)} req/s), p50 ${load.p50_ms} ms, p99 ${load.p99_ms} ms`,
  );
  const exited = once(gateway.child, "exit");
  gateway.child.kill("SIGTERM");
  await exited;
} finally {
  killAll();
}

const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
if (!file) throw new Error(`no profile written in ${dir}`);
const profile = JSON.parse(readFileSync(join(dir, file), "utf8"));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const byFunction = new Map();
const byFile = new Map();
let total = 0;
profile.samples.forEach((id, i) => {
  const { callFrame } = nodes.get(id);
  const ms = (profile.timeDeltas[i] ?? 0) / 1000;
  total += ms;
  const where = callFrame.url.replace(/^.*\/(node_modules\/[^/]+|dist)\//, "$1/") || "(native)";
  const fn = `${callFrame.functionName || "(anonymous)"} ${where}${callFrame.url ? `:${callFrame.lineNumber + 1}` : ""}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + ms);
  byFile.set(where, (byFile.get(where) ?? 0) + ms);
});
const top = (map, n) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, ms]) => `${((100 * ms) / total).toFixed(1).padStart(5)} %  ${k}`)
    .join("\n");
console.log(`\nself time by function (${file} in ${dir}):\n${top(byFunction, 25)}`);
console.log(`\nself time by file:\n${top(byFile, 15)}`);
