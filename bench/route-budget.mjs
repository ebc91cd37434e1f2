// `npm run bench:route-budget`: what a route budget (`routes[].limits.total`, one token bucket
// shared by every caller: one hot key) costs at full load, with and without `batch`. Gateways
// with different limits run in interleaved rounds on one upstream and one Redis, each driven by
// the bench's 1000 API keys, and each with its own store.prefix so none touches another's keys:
//
//   per-caller      the plan's global + route token bucket per caller (never denies): the baseline
//   + budget        the same plus a route budget every caller shares, big enough never to deny
//   + budget/batch  as above with `batch` on the route budget
//   budget binds    the route budget denies most requests (BENCH_BUDGET_RATE/s, burst a tenth)
//   binds/batch     as above with `batch`
//
// Per target, medians of the rounds: req/s, p99, gateway CPU per request (user + system from
// /proc, every thread), Redis CPU per request (INFO cpu), scripts sent per request (INFO
// commandstats), and the gateway's own counts of denials, deny-cache denials and store errors
// (its /metrics: on_failure is open, so a store that failed would pass for a cheap one).
// Linux and wrk only; loopback only; every load stops by itself (wrk -d) and a watchdog ends
// the whole run if something hangs.
//
//   BENCH_ROUNDS (9)  BENCH_SECONDS (3)  BENCH_CONNECTIONS (64)  BENCH_BATCH (20)
//   BENCH_BUDGET_RATE (1000)
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import {
  cpuSeconds,
  freePort,
  hasWrk,
  KEYS,
  killAll,
  median,
  redisCounters,
  root,
  start,
  startRedis,
  startUpstream,
  wrk,
} from "./support.mjs";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const BATCH = Number(process.env.BENCH_BATCH ?? 20);
const BUDGET_RATE = Number(process.env.BENCH_BUDGET_RATE ?? 1000);

if (!hasWrk) {
  console.error("bench:route-budget needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}

const NEVER = "rate: 1000000/s, burst: 1000000";
const BINDING = `rate: ${BUDGET_RATE}/s, burst: ${Math.max(1, BUDGET_RATE / 10)}`;
const TARGETS = [
  { name: "per-caller", budget: undefined },
  { name: "+ budget", budget: `{ ${NEVER} }` },
  { name: `+ budget, batch ${BATCH}`, budget: `{ ${NEVER}, batch: ${BATCH} }` },
  { name: "budget binds", budget: `{ ${BINDING} }` },
  { name: `binds, batch ${BATCH}`, budget: `{ ${BINDING}, batch: ${BATCH} }` },
];

/** A gateway whose plan limits every caller globally and on the route; `budget` is the route's `total`. */
async function startGateway({ prefix, storeUrl, upstream, budget }) {
  const port = await freePort();
  const adminPort = await freePort();
  const clients = Array.from(
    { length: KEYS },
    (_, i) => `  - { id: bench-${i}, key: bench-key-${i}, plan: bench }`,
  );
  const config = join(mkdtempSync(join(tmpdir(), "tollgate-route-budget-")), "gateway.yaml");
  writeFileSync(
    config,
    `listen: 127.0.0.1:${port}
admin: { listen: 127.0.0.1:${adminPort} }
log: { level: info, requests: false }
store: { url: ${storeUrl}, prefix: "${prefix}", timeout: 100ms, on_failure: open }
upstreams: { api: ${upstream} }
clients:
${clients.join("\n")}
plans:
  bench: { global: { ${NEVER} }, routes: { default: { ${NEVER} } } }
routes:
  - { name: default, match: { path: / }, upstream: api${budget ? `, limits: { total: ${budget} }` : ""} }
`,
  );
  const child = await start(prefix, process.execPath, [join(root, "dist/cli.js"), "--config", config], (l) =>
    l.includes("tollgate listening"),
  );
  return {
    pid: child.pid,
    url: `http://127.0.0.1:${port}`,
    metrics: `http://127.0.0.1:${adminPort}/metrics`,
  };
}

/** The gateway's counters that say how its requests were decided. */
async function gatewayCounters(url) {
  const text = await (await fetch(url)).text();
  const sum = (re) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
  return {
    limited: sum(/^tollgate_requests_total\{[^}]*decision="limited"[^}]*\} (\d+)/gm),
    degraded: sum(/^tollgate_requests_total\{[^}]*decision="degraded_\w+"[^}]*\} (\d+)/gm),
    local: sum(/^tollgate_local_denials_total (\d+)/gm),
    storeErrors: sum(/^tollgate_store_errors_total\{[^}]*\} (\d+)/gm),
  };
}

/** One wrk run against a gateway, with the CPU, Redis and gateway counters it moved. */
async function measure(gateway, redis) {
  const g0 = await gatewayCounters(gateway.metrics);
  const r0 = await redisCounters(redis);
  const cpu0 = cpuSeconds(gateway.pid);
  const j = wrk(gateway.url, SECONDS, CONNECTIONS);
  const cpu1 = cpuSeconds(gateway.pid);
  const r1 = await redisCounters(redis);
  const g1 = await gatewayCounters(gateway.metrics);
  const n = j.requests;
  return {
    rps: n / j.seconds,
    p99: j.p99_ms,
    requests: n,
    gatewayUs: ((cpu1 - cpu0) * 1e6) / n,
    redisUs: ((r1.seconds - r0.seconds) * 1e6) / n,
    scripts: (r1.scripts - r0.scripts) / n,
    admittedRps: (n - j.non2xx) / j.seconds,
    denied: j.non2xx / n,
    local: g1.local - g0.local,
    degraded: g1.degraded - g0.degraded,
    storeErrors: g1.storeErrors - g0.storeErrors,
    // Non-2xx answers that were not 429s. The gateway also counts the requests in flight when wrk
    // stops, which wrk does not: hence the floor at 0.
    otherErrors: j.errors + Math.max(0, j.non2xx - (g1.limited - g0.limited)),
  };
}

async function main() {
  const storeUrl = await startRedis();
  const redis = new Redis(storeUrl);
  const upstream = await startUpstream();
  const targets = [];
  for (const [i, t] of TARGETS.entries())
    targets.push({
      ...t,
      gateway: await startGateway({ prefix: `tg${i}:`, storeUrl, upstream, budget: t.budget }),
    });
  for (const t of targets) wrk(t.gateway.url, 2, CONNECTIONS); // warm-up: JIT, pools, Redis scripts

  console.log(
    `route budget at full load: wrk -t1 -c${CONNECTIONS}, ${KEYS} API keys, ${ROUNDS} rounds x ${SECONDS} s, interleaved; batch ${BATCH}; binding budget ${BINDING}`,
  );
  const runs = new Map(targets.map((t) => [t.name, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const t of round % 2 ? targets : [...targets].reverse()) {
      const r = await measure(t.gateway, redis);
      runs.get(t.name).push(r);
      console.log(
        `  round ${round} ${t.name.padEnd(18)} ${r.rps.toFixed(0).padStart(6)} req/s  gateway ${r.gatewayUs.toFixed(1).padStart(5)} µs/req  Redis ${r.redisUs.toFixed(1).padStart(5)} µs/req  scripts/req ${r.scripts.toFixed(3)}  denied ${(r.denied * 100).toFixed(1)} %`,
      );
    }
  }

  const rows = targets.map((t) => {
    const rs = runs.get(t.name);
    const m = (f) => median(rs.map(f));
    const total = (f) => rs.reduce((n, r) => n + f(r), 0);
    return {
      target: t.name,
      rps: m((r) => r.rps),
      admitted_rps: m((r) => r.admittedRps),
      p99_ms: m((r) => r.p99),
      gateway_us_per_request: m((r) => r.gatewayUs),
      redis_us_per_request: m((r) => r.redisUs),
      scripts_per_request: m((r) => r.scripts),
      denied_share: m((r) => r.denied),
      local_denials: total((r) => r.local),
      degraded: total((r) => r.degraded),
      store_errors: total((r) => r.storeErrors),
      other_non2xx_or_errors: total((r) => r.otherErrors),
    };
  });
  console.log("\nmedian of rounds (local denials, degraded, store errors and other failures: totals):");
  console.log(
    "| gateway | req/s | admitted/s | p99 ms | gateway CPU µs/req | Redis CPU µs/req | scripts/req | denied | deny-cache denials | degraded | store errors | other failures |",
  );
  console.log("| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |");
  for (const s of rows)
    console.log(
      `| ${s.target} | ${s.rps.toFixed(0)} | ${s.admitted_rps.toFixed(0)} | ${s.p99_ms.toFixed(2)} | ${s.gateway_us_per_request.toFixed(1)} | ${s.redis_us_per_request.toFixed(1)} | ${s.scripts_per_request.toFixed(3)} | ${(s.denied_share * 100).toFixed(1)} % | ${s.local_denials} | ${s.degraded} | ${s.store_errors} | ${s.other_non2xx_or_errors} |`,
    );
  // The machine drifts between rounds: each target against the baseline of the same round.
  const base = runs.get(targets[0].name);
  console.log("\nagainst per-caller in the same round, median (range):");
  for (const t of targets.slice(1)) {
    const rs = runs.get(t.name);
    const ratio = (f) => {
      const values = rs.map((r, i) => f(r) / f(base[i]));
      return `${median(values).toFixed(2)}x (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`;
    };
    console.log(
      `  ${t.name.padEnd(18)} req/s ${ratio((r) => r.rps)}  gateway CPU/req ${ratio((r) => r.gatewayUs)}  Redis CPU/req ${ratio((r) => r.redisUs)}`,
    );
  }
  redis.disconnect();
}

// Every load is bounded by wrk -d; this ends the run if a process or Redis hangs instead.
const watchdog = setTimeout(
  () => {
    console.error("bench:route-budget: did not finish in time");
    killAll();
    process.exit(1);
  },
  (TARGETS.length * (ROUNDS + 1) * (SECONDS + 5) + 120) * 1000,
);
watchdog.unref();
try {
  await main();
} finally {
  killAll();
}
