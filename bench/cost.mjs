import {
  cpuSeconds,
  freePort,
  hasWrk,
  killAll,
  median,
  start,
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
// BENCH_COST_TRACES=off,1,0.1: gateways with tracing off and at each sample ratio, exporting to
// a local collector (bench/otlp-sink.mjs), against each other instead of the passthrough.
const TRACES = (process.env.BENCH_COST_TRACES ?? "").split(",").filter(Boolean);

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

/** What tracing costs: the gateway with telemetry.traces at each ratio of TRACES, and off. */
async function tracing(storeUrl, upstream) {
  const sinkPort = await freePort();
  const sink = await start("otlp sink", process.execPath, ["bench/otlp-sink.mjs", String(sinkPort)], (l) =>
    l.includes("listening"),
  );
  const variants = [];
  for (const v of TRACES) {
    const extra =
      v === "off"
        ? ""
        : `telemetry: { traces: { endpoint: http://127.0.0.1:${sinkPort}/v1/traces, sample: ${Number(v)} } }\n`;
    const gw = await startBenchGateway({
      name: `tollgate traces ${v}`,
      storeUrl,
      upstream,
      limited: LIMITS !== "none",
      extra,
    });
    wrk(gw.url, SECONDS, CONNECTIONS, FLOOD); // warm-up
    variants.push({
      name: v === "off" ? "tracing off" : `sample ${Number(v).toFixed(2)}`,
      gw,
      cpu: [],
      rps: [],
    });
  }
  console.log(
    `tollgate (${LIMITS === "none" ? "no limit" : `limits on ${LIMITS}`}, ${FLOOD ? "flood of denials" : "allowed requests"}) with telemetry.traces: ${PAIRS} rounds of ${SECONDS} s each, wrk -c${CONNECTIONS}`,
  );
  for (let i = 0; i < PAIRS; i++) {
    const line = [];
    for (const v of variants) {
      const m = measure(v.gw.url, v.gw.child.pid, FLOOD);
      v.cpu.push(m.cpuUs);
      v.rps.push(m.rps);
      line.push(`${v.name} ${m.rps.toFixed(0).padStart(6)} req/s ${m.cpuUs.toFixed(0).padStart(4)} µs`);
    }
    console.log(`  round ${i + 1}: ${line.join("   ")}`);
  }
  const base = variants[0];
  console.log("");
  for (const v of variants) {
    const cpuRatios = v.cpu.map((c, i) => c / base.cpu[i]);
    const rpsRatios = v.rps.map((r, i) => r / base.rps[i]);
    console.log(
      `${v.name.padEnd(12)} median ${median(v.cpu).toFixed(1)} µs CPU/req, ${median(v.rps).toFixed(0)} req/s; against ${base.name}: CPU/req ${median(cpuRatios).toFixed(2)}x, req/s ${median(rpsRatios).toFixed(2)}x`,
    );
  }
  sink.kill("SIGUSR2");
  await new Promise((r) => setTimeout(r, 200));
}

async function main() {
  const storeUrl = LIMITS === "redis" ? await startRedis() : "memory://";
  const upstream = await startUpstream();
  if (TRACES.length > 0) return tracing(storeUrl, upstream);
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
