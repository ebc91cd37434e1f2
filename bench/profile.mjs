// `npm run bench:profile`: where a request's CPU goes, under the bench's load (1000 API keys, two
// token buckets on Redis per request, wrk -c64), once the gateway is warm.
//
// With Linux perf (apt-get install linux-perf; root or perf_event_paranoid <= 1): tollgate and
// the bare undici passthrough side by side, each warmed up, then sampled for CPU time (on-CPU
// only, every thread, call stacks through the JIT) while it serves the load: µs of CPU per
// request by kind (kernel, V8 builtins, Node's JS, undici, tollgate's JS, the compiler's and the
// GC's threads...), then tollgate's per file and function of its own code, each sample counted
// for the innermost tollgate frame on its stack (what it was spent for: a socket write under
// proxy/stream.js counts there). The two serve different rates on a shared machine: per-request
// costs that are paid per event-loop turn or per wakeup are larger at a lower rate.
//
// Without perf: V8's --cpu-prof of the gateway, self time by function and file. Its samples
// are wall-clock: a process preempted on a shared core is counted in the function it stopped
// in (often a socket write), so native figures there are waits as much as work.
//
// For the cost-per-request work: profile, change one thing, profile again.
//
//   BENCH_PROFILE_SECONDS (8)  BENCH_CONNECTIONS (64)  BENCH_WARMUP_SECONDS (10)
//   BENCH_PROFILE_DIR (a temporary folder)
//   BENCH_PROFILE_LIMITS (redis): redis, memory or none (the pipeline with no limit to check)
//   BENCH_PROFILE_AGAINST (passthrough): passthrough, or floor (the passthrough with one batched
//     Redis round trip per request, bench/floor-peer.mjs: what tollgate adds to the least work
//     a limiter on Redis does)
import { once } from "node:events";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { category, NODE_PROF_ARGS, ownFrame, perfWorks, perRequest, recordStacks } from "./perf-profile.mjs";
import {
  hasWrk,
  killAll,
  startBenchGateway,
  startFloor,
  startPassthrough,
  startRedis,
  startUpstream,
  wrk,
} from "./support.mjs";

const SECONDS = Number(process.env.BENCH_PROFILE_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 10);
const LIMITS = process.env.BENCH_PROFILE_LIMITS ?? "redis";
const AGAINST = process.env.BENCH_PROFILE_AGAINST ?? "passthrough";
const dir = process.env.BENCH_PROFILE_DIR ?? mkdtempSync(join(tmpdir(), "tollgate-profile-"));

if (!hasWrk) {
  console.error("bench:profile needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}

const table = (rows, n = rows.length) =>
  rows
    .slice(0, n)
    .map(([k, us]) => `${us.toFixed(1).padStart(8)}  ${k}`)
    .join("\n");

if (perfWorks()) {
  try {
    const redisUrl = LIMITS === "redis" || AGAINST === "floor" ? await startRedis() : undefined;
    const storeUrl = LIMITS === "redis" ? redisUrl : "memory://";
    const upstream = await startUpstream();
    process.env.BENCH_GATEWAY_NODE_ARGS = NODE_PROF_ARGS.join(" ");
    const gateway = await startBenchGateway({ storeUrl, upstream, cwd: dir, limited: LIMITS !== "none" });
    const bare =
      AGAINST === "floor"
        ? await startFloor(upstream, redisUrl, NODE_PROF_ARGS, dir)
        : await startPassthrough(upstream, NODE_PROF_ARGS, dir);
    const profiles = [];
    for (const [name, target] of [
      [
        LIMITS === "none" ? "tollgate, no limit" : `tollgate on ${LIMITS === "redis" ? "Redis" : "memory"}`,
        gateway,
      ],
      [AGAINST === "floor" ? "floor (passthrough + batched Redis read/write)" : "undici passthrough", bare],
    ]) {
      wrk(target.url, WARMUP_SECONDS, CONNECTIONS);
      const { result, samples } = await recordStacks(
        target.child.pid,
        join(dir, `${profiles.length}.perf`),
        () => wrk(target.url, SECONDS, CONNECTIONS),
      );
      const requests = result.requests;
      const byKind = perRequest(samples, requests, (s) => category(s, target.child.pid));
      const total = byKind.reduce((sum, [, us]) => sum + us, 0);
      console.log(
        `\n${name}: ${requests} requests in ${result.seconds} s (${Math.round(requests / result.seconds)} req/s), ${total.toFixed(1)} µs of CPU per request, by kind:\n${table(byKind)}`,
      );
      profiles.push({ name, requests, samples });
    }
    const [own] = profiles;
    console.log(
      `\ntollgate, µs per request by the innermost frame of its own code (callees included):\n${table(
        perRequest(own.samples, own.requests, (s) => ownFrame(s, true)),
        20,
      )}`,
    );
    console.log(
      `\n... by function:\n${table(
        perRequest(own.samples, own.requests, (s) => ownFrame(s, false)),
        25,
      )}`,
    );
  } finally {
    killAll();
    // The JIT's dumps and the symbol files perf inject made of them (tens of MB): the samples
    // with their symbols are in <n>.perf.jit.
    for (const f of readdirSync(dir)) if (/^(jitted-|jit-|isolate-)/.test(f)) rmSync(join(dir, f));
  }
  console.log(`\nperf data with symbols: ${dir}/0.perf.jit (tollgate), 1.perf.jit (passthrough)`);
  process.exit(0);
}

// The gateway writes its profile when it exits, so it is stopped with SIGTERM, not killed.
process.env.BENCH_GATEWAY_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${dir}`;
try {
  const storeUrl = await startRedis();
  const upstream = await startUpstream();
  const gateway = await startBenchGateway({ storeUrl, upstream });
  wrk(gateway.url, WARMUP_SECONDS, CONNECTIONS); // warm-up, in the profile too
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
