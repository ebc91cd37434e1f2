import {
  cpuSeconds,
  hasWrk,
  killAll,
  median,
  startBenchGateway,
  startPassthrough,
  startRedis,
  startUpstream,
  wrk,
} from "./support.mjs";

const LIMITS = process.env.BENCH_COST_LIMITS ?? "redis";
const FLOOD = (process.env.BENCH_COST_LOAD ?? "allowed") === "flood";
const PAIRS = Number(process.env.BENCH_COST_PAIRS ?? 9);
const SECONDS = Number(process.env.BENCH_COST_SECONDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);

if (!hasWrk) {
  console.error("bench:cost needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}
if (!["redis", "memory", "none"].includes(LIMITS) || (FLOOD && LIMITS === "none")) {
  console.error("BENCH_COST_LIMITS is redis, memory or none (a flood needs a limit)");
  process.exit(2);
}

/** req/s and CPU µs per request of `pid` while wrk drives `url`. */
function measure(url, pid, flood) {
  const before = cpuSeconds(pid);
  const j = wrk(url, SECONDS, CONNECTIONS, flood);
  return { rps: j.requests / j.seconds, cpuUs: ((cpuSeconds(pid) - before) * 1e6) / j.requests };
}

async function main() {
  const storeUrl = LIMITS === "redis" ? await startRedis() : "memory://";
  const upstream = await startUpstream();
  const tollgate = await startBenchGateway({ storeUrl, upstream, limited: LIMITS !== "none" });
  const passthrough = await startPassthrough(upstream);
  wrk(tollgate.url, SECONDS, CONNECTIONS, FLOOD); // warm-up: JIT, pools, Redis scripts
  wrk(passthrough.url, SECONDS, CONNECTIONS);

  console.log(
    `tollgate (${LIMITS === "none" ? "no limit" : `limits on ${LIMITS}`}, ${FLOOD ? "flood of denials" : "allowed requests"}) against the undici passthrough: ${PAIRS} pairs of ${SECONDS} s, wrk -c${CONNECTIONS}`,
  );
  const rpsRatios = [];
  const cpuRatios = [];
  for (let i = 0; i < PAIRS; i++) {
    const t = measure(tollgate.url, tollgate.child.pid, FLOOD);
    const p = measure(passthrough.url, passthrough.child.pid, false);
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
  killAll();
}
