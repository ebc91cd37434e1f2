// `npm run bench`: what a request costs, side by side in one run. tollgate on Redis against a bare
// undici passthrough, the seed's design (http-proxy + one token-bucket EVALSHA per request) and
// http-proxy + rate-limiter-flexible, all in front of the same upstream and the same Redis, driven
// by wrk with 1000 API keys in interleaved rounds. tollgate checks two token buckets per request
// (the caller's global limit and its route limit) and sends both header styles; the peers check
// one limit and set one header. Beside them runs the floor (bench/floor-peer.mjs): the passthrough
// with one batched Redis round trip per request that reads and writes the caller's two keys and
// decides nothing, batched as tollgate batches. Each target is printed with the floor's own
// figure and its range over the rounds: a target the floor misses too is out of reach here for a
// limiter that batches this way on this Redis, whatever the code around the round trip. Then
// tollgate with no limit on its callers (the request path alone), and last tollgate on a master
// with one replica, without and with store.replicas.wait (what WAIT costs).
//
// Per target, medians of the rounds: req/s, p50, p99, the proxy's CPU per request (user + system
// from /proc, every thread, worker processes included), Redis's CPU per request (INFO cpu) and
// the scripts it was sent per request (INFO commandstats). Then a paced load (each connection
// waits between requests: about 2,000 req/s) on tollgate, the passthrough and the floor, for the
// latency tollgate adds. Then the targets of the cost-per-request work, each with its figure:
// Redis and gateway CPU against the floor's, req/s against the peers', latency over the floor.
//
// The machine drifts: the same target can serve twice as fast a minute later. A ratio is taken
// within each round, between targets measured back to back (the order puts compared pairs side
// by side), and the median and range of the per-round ratios are reported. Figures are only
// comparable within one run. Linux and wrk only; loopback only; every load stops by itself.
//
//   BENCH_SECONDS (4)  BENCH_ROUNDS (5)  BENCH_CONNECTIONS (64)  BENCH_WARMUP_SECONDS (10, per target)
//   BENCH_PACED_CONNECTIONS (32)  BENCH_PACED_DELAY_MS (16)
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import {
  cpuSeconds,
  hasWrk,
  KEYS,
  killAll,
  median,
  redisCounters,
  root,
  startBenchGateway,
  startPassthrough,
  startProxyScript,
  startRedis,
  startUpstream,
  wrk,
} from "./support.mjs";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const PACED_CONNECTIONS = Number(process.env.BENCH_PACED_CONNECTIONS ?? 32);
const PACED_DELAY_MS = Number(process.env.BENCH_PACED_DELAY_MS ?? 16);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 10);

if (!hasWrk) {
  console.error("npm run bench needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}

/** Every command Redis executed so far, script internals included (Redis 7 counts both). */
async function redisCommandsExecuted(redis) {
  let calls = 0;
  for (const m of (await redis.info("commandstats")).matchAll(/cmdstat_([\w|]+):calls=(\d+)/g))
    if (m[1] !== "info") calls += Number(m[2]);
  return calls;
}

/** One wrk run against a target, with the proxy's and Redis's CPU and the commands it cost. */
async function measure(target, redis, { connections = CONNECTIONS, delayMs = 0 } = {}) {
  // A target on Redis of its own (the replicated pair) is measured on that Redis.
  redis = target.redis ?? redis;
  const r0 = await redisCounters(redis);
  const c0 = await redisCommandsExecuted(redis);
  const cpu0 = cpuSeconds(target.pid);
  const j = wrk(target.url, SECONDS, connections, target.flood, delayMs);
  const cpu1 = cpuSeconds(target.pid);
  const r1 = await redisCounters(redis);
  const c1 = await redisCommandsExecuted(redis);
  const n = j.requests;
  return {
    rps: n / j.seconds,
    p50: j.p50_ms,
    p99: j.p99_ms,
    requests: n,
    errors: j.errors,
    non2xx: j.non2xx,
    proxyUs: ((cpu1 - cpu0) * 1e6) / n,
    redisUs: ((r1.seconds - r0.seconds) * 1e6) / n,
    scripts: (r1.scripts - r0.scripts) / n,
    commands: (c1 - c0) / n,
  };
}

async function startPeer(name, script, upstream, redisUrl) {
  const { child, url } = await startProxyScript(name, script, upstream, [redisUrl]);
  return { pid: child.pid, url };
}

const fixed = (v, digits) => (Number.isFinite(v) ? v.toFixed(digits) : "–");

async function main() {
  const redisUrl = await startRedis();
  const redis = new Redis(redisUrl);
  await redis.ping();
  const upstream = await startUpstream();
  const single = await startBenchGateway({ storeUrl: redisUrl, upstream });
  // The same gateway with no limit on its callers: the request path alone, against the passthrough.
  const unlimited = await startBenchGateway({
    name: "tollgate-no-limit",
    storeUrl: redisUrl,
    upstream,
    limited: false,
  });
  const workers = await startBenchGateway({
    name: "tollgate-workers",
    storeUrl: redisUrl,
    upstream,
    workers: 2,
  });
  // store.replicas: a master with one replica of its own, so that replication does not weigh on
  // the other targets' Redis; tollgate on it without and with the wait, measured side by side.
  const replicatedUrl = await startRedis();
  const replicated = new Redis(replicatedUrl);
  await startRedis(["--replicaof", "127.0.0.1", new URL(replicatedUrl).port]);
  while ((await replicated.info("replication")).match(/connected_slaves:(\d+)/)[1] === "0")
    await new Promise((r) => setTimeout(r, 50));
  const onReplicated = await startBenchGateway({
    name: "tollgate-replicated",
    storeUrl: replicatedUrl,
    upstream,
  });
  const waiting = await startBenchGateway({
    name: "tollgate-wait",
    storeUrl: replicatedUrl,
    upstream,
    storeExtra: ", replicas: { wait: 1, timeout: 50ms }",
  });
  const passthrough = await startPassthrough(upstream);
  const seed = await startPeer("seed", "bench/seed-peer.mjs", upstream, redisUrl);
  const rlf = await startPeer("http-proxy", "bench/http-proxy-peer.mjs", upstream, redisUrl);
  const floor = await startPeer("floor", "bench/floor-peer.mjs", upstream, redisUrl);

  // Compared pairs are neighbours in this order, forward and reversed alike: the seed beside
  // tollgate, tollgate beside the passthrough, the passthrough beside tollgate with no limit, the
  // floor beside the seed and rate-limiter-flexible; tollgate against the floor is two apart, the
  // floor against the passthrough three, the flood against the passthrough two.
  const T = {
    rlf: { name: "http-proxy + rate-limiter-flexible", pid: rlf.pid, url: rlf.url },
    seed: { name: "seed design: http-proxy + EVALSHA/request", pid: seed.pid, url: seed.url },
    tollgate: { name: "tollgate on Redis", pid: single.child.pid, url: single.url },
    bare: { name: "undici passthrough", pid: passthrough.child.pid, url: passthrough.url },
    unlimited: { name: "tollgate, no limit", pid: unlimited.child.pid, url: unlimited.url },
    floor: { name: "floor: passthrough + batched read/write", pid: floor.pid, url: floor.url },
    flood: {
      name: "flood: tollgate, one caller denied",
      pid: single.child.pid,
      url: single.url,
      flood: true,
    },
    workers: { name: "tollgate on Redis, workers: 2", pid: workers.child.pid, url: workers.url },
    replicated: {
      name: "tollgate on Redis + 1 replica",
      pid: onReplicated.child.pid,
      url: onReplicated.url,
      redis: replicated,
    },
    wait: {
      name: "the same, store.replicas.wait: 1",
      pid: waiting.child.pid,
      url: waiting.url,
      redis: replicated,
    },
  };
  const order = [
    T.rlf,
    T.floor,
    T.seed,
    T.tollgate,
    T.bare,
    T.unlimited,
    T.flood,
    T.workers,
    T.replicated,
    T.wait,
  ];
  console.log(
    `load: wrk -t1 -c${CONNECTIONS}, ${KEYS} API keys, ${ROUNDS} rounds of ${SECONDS} s, interleaved; paced: -c${PACED_CONNECTIONS}, ${PACED_DELAY_MS} ms between requests`,
  );
  // Warm-up: pools, Redis scripts and above all the JIT. A gateway runs for days; what a request
  // costs it is the cost once V8 has optimized its request path, which under this load takes it
  // about ten seconds (measured with --trace-opt: ~780 functions optimized in the first 4 s, ~30
  // per 4 s from 8 s on). Until then the optimizing compiler's threads cost as much CPU as the
  // requests themselves, and more for a larger program, so a short warm-up measures mostly that.
  for (const t of order) wrk(t.url, WARMUP_SECONDS, CONNECTIONS, t.flood);

  const results = new Map(order.map((t) => [t, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const t of round % 2 ? order : [...order].reverse()) {
      const r = await measure(t, redis);
      results.get(t).push(r);
      console.log(
        `  round ${round} ${t.name.padEnd(42)} ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms  proxy ${r.proxyUs.toFixed(1)} µs/req  Redis ${r.redisUs.toFixed(1)} µs/req  scripts ${r.scripts.toFixed(3)}/req`,
      );
    }
  }

  // Paced: the latency tollgate adds where neither it nor Redis is saturated.
  const paced = { tollgate: [], bare: [], floor: [] };
  for (const t of [T.tollgate, T.bare, T.floor]) wrk(t.url, 1, PACED_CONNECTIONS, false, PACED_DELAY_MS);
  for (let round = 1; round <= ROUNDS; round++) {
    for (const key of round % 2 ? ["tollgate", "bare", "floor"] : ["floor", "bare", "tollgate"]) {
      const r = await measure(T[key], redis, { connections: PACED_CONNECTIONS, delayMs: PACED_DELAY_MS });
      paced[key].push(r);
      console.log(
        `  paced ${round} ${T[key].name.padEnd(42)} ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms  proxy ${r.proxyUs.toFixed(1)} µs/req`,
      );
    }
  }

  const summary = new Map(
    order.map((t) => {
      const rs = results.get(t);
      const m = (f) => median(rs.map(f));
      return [
        t,
        {
          target: t.name,
          rps: m((r) => r.rps),
          p50_ms: m((r) => r.p50),
          p99_ms: m((r) => r.p99),
          proxy_cpu_us_per_request: m((r) => r.proxyUs),
          redis_cpu_us_per_request: t === T.bare ? Number.NaN : m((r) => r.redisUs),
          scripts_per_request: m((r) => r.scripts),
          redis_commands_per_request: m((r) => r.commands),
          errors: rs.reduce((n, r) => n + r.errors, 0),
          non2xx: rs.reduce((n, r) => n + r.non2xx, 0),
        },
      ];
    }),
  );

  console.log(
    "\n| target | req/s | p50 ms | p99 ms | proxy CPU µs/req | Redis CPU µs/req | script calls/req | non-2xx |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  for (const s of summary.values()) {
    console.log(
      `| ${s.target} | ${s.rps.toFixed(0)} | ${s.p50_ms.toFixed(2)} | ${s.p99_ms.toFixed(2)} | ${s.proxy_cpu_us_per_request.toFixed(1)} | ${fixed(s.redis_cpu_us_per_request, 1)} | ${s.scripts_per_request.toFixed(3)} | ${s.non2xx} |`,
    );
  }
  /** Per paced round, `who`'s `field` minus `base`'s (the passthrough's): the median and range. */
  const pacedAddedRounds = (field, who, base = "bare") => {
    const values = paced[who].map((r, i) => r[field] - paced[base][i][field]);
    return { median: median(values), min: Math.min(...values), max: Math.max(...values) };
  };
  const pacedAdded = (field, who = "tollgate") => pacedAddedRounds(field, who).median;
  const pacedSummary = {
    tollgate_rps: median(paced.tollgate.map((r) => r.rps)),
    tollgate_p50_ms: median(paced.tollgate.map((r) => r.p50)),
    tollgate_p99_ms: median(paced.tollgate.map((r) => r.p99)),
    passthrough_p50_ms: median(paced.bare.map((r) => r.p50)),
    passthrough_p99_ms: median(paced.bare.map((r) => r.p99)),
    added_p50_ms: pacedAdded("p50"),
    added_p99_ms: pacedAdded("p99"),
    floor_p50_ms: median(paced.floor.map((r) => r.p50)),
    floor_p99_ms: median(paced.floor.map((r) => r.p99)),
    floor_added_p50_ms: pacedAdded("p50", "floor"),
    floor_added_p99_ms: pacedAdded("p99", "floor"),
    // Both serve the same rate here, so what a process spends per event-loop wakeup weighs the
    // same on both: the full-load ratio also carries the passthrough's larger batches of events.
    cpu_ratio_rounds: paced.tollgate.map((r, i) => r.proxyUs / paced.bare[i].proxyUs),
  };
  console.log(
    `| paced, tollgate (added over the passthrough) | ${pacedSummary.tollgate_rps.toFixed(0)} | ${pacedSummary.tollgate_p50_ms.toFixed(2)} (+${pacedSummary.added_p50_ms.toFixed(2)}) | ${pacedSummary.tollgate_p99_ms.toFixed(2)} (+${pacedSummary.added_p99_ms.toFixed(2)}) | | | | |`,
  );
  console.log(
    `| paced, floor (added over the passthrough) | ${median(paced.floor.map((r) => r.rps)).toFixed(0)} | ${pacedSummary.floor_p50_ms.toFixed(2)} (+${pacedSummary.floor_added_p50_ms.toFixed(2)}) | ${pacedSummary.floor_p99_ms.toFixed(2)} (+${pacedSummary.floor_added_p99_ms.toFixed(2)}) | | | | |`,
  );

  /** Per round, f(a) / f(b): the median and range over the rounds. */
  const perRound = (a, b, f) => {
    const ra = results.get(a);
    const rb = results.get(b);
    const values = ra.map((r, i) => f(r) / f(rb[i]));
    return { median: median(values), min: Math.min(...values), max: Math.max(...values) };
  };
  const rps = (r) => r.rps;
  const flood = summary.get(T.flood);
  // Each target with the floor's figure for it (the last element): the same ratio, the floor in
  // tollgate's place.
  // Issue 36's targets, each against the floor where the floor is the bound (the least a limiter
  // that batches this way on this Redis can cost), else with the floor's own figure beside it.
  const checks = [
    ["Redis CPU/req, tollgate / floor", perRound(T.tollgate, T.floor, (r) => r.redisUs), "<=", 1.1],
    [
      "Redis CPU/req, tollgate / seed design",
      perRound(T.tollgate, T.seed, (r) => r.redisUs),
      "",
      undefined,
      perRound(T.floor, T.seed, (r) => r.redisUs),
    ],
    ["gateway CPU/req, tollgate / floor", perRound(T.tollgate, T.floor, (r) => r.proxyUs), "<=", 1.15],
    [
      "gateway CPU/req, tollgate / passthrough",
      perRound(T.tollgate, T.bare, (r) => r.proxyUs),
      "",
      undefined,
      perRound(T.floor, T.bare, (r) => r.proxyUs),
    ],
    ["gateway CPU/req, no limit / passthrough", perRound(T.unlimited, T.bare, (r) => r.proxyUs), "<=", 1.15],
    [
      "req/s, tollgate / rate-limiter-flexible",
      perRound(T.tollgate, T.rlf, rps),
      ">=",
      1.5,
      perRound(T.floor, T.rlf, rps),
    ],
    [
      "req/s, tollgate / seed design",
      perRound(T.tollgate, T.seed, rps),
      ">=",
      1.3,
      perRound(T.floor, T.seed, rps),
    ],
    ["paced p50 added over the floor (ms)", pacedAddedRounds("p50", "tollgate", "floor"), "<=", 0.15],
    [
      "paced p50 added over the passthrough (ms)",
      pacedAddedRounds("p50", "tollgate"),
      "",
      undefined,
      pacedAddedRounds("p50", "floor"),
    ],
    ["paced p99 added over the floor (ms)", pacedAddedRounds("p99", "tollgate", "floor"), "", undefined],
    [
      "paced p99 added over the passthrough (ms)",
      pacedAddedRounds("p99", "tollgate"),
      "",
      undefined,
      pacedAddedRounds("p99", "floor"),
    ],
    ["flood: Redis commands per denial", { median: flood.redis_commands_per_request }, "<=", 0.01],
    ["flood: denials/s / passthrough req/s", perRound(T.flood, T.bare, rps), ">=", 1],
    ["req/s, workers: 2 / workers: 1", perRound(T.workers, T.tollgate, rps), "", undefined],
    ["replicas.wait 1: req/s / without", perRound(T.wait, T.replicated, rps), "", undefined],
    ["replicas.wait 1: p50 / without", perRound(T.wait, T.replicated, (r) => r.p50), "", undefined],
    [
      "replicas.wait 1: gateway CPU/req / without",
      perRound(T.wait, T.replicated, (r) => r.proxyUs),
      "",
      undefined,
    ],
    [
      "replicas.wait 1: Redis CPU/req / without",
      perRound(T.wait, T.replicated, (r) => r.redisUs),
      "",
      undefined,
    ],
    [
      "paced: gateway CPU/req, tollgate / passthrough",
      {
        median: median(pacedSummary.cpu_ratio_rounds),
        min: Math.min(...pacedSummary.cpu_ratio_rounds),
        max: Math.max(...pacedSummary.cpu_ratio_rounds),
      },
      "",
      undefined,
    ],
  ];
  console.log("\ntargets (per-round ratios: median, range):");
  const targets = {};
  const within = (v, op, bound) => (op === "<=" ? v <= bound : op === ">=" ? v >= bound : undefined);
  for (const [label, r, op, bound, floor] of checks) {
    const held = within(r.median, op, bound);
    const range = r.min === undefined ? "" : `  (rounds ${r.min.toFixed(2)}–${r.max.toFixed(2)})`;
    const verdict = held === undefined ? "as measured" : `${held ? "holds" : "MISSED"}: ${op} ${bound}`;
    const floorNote =
      floor === undefined
        ? ""
        : `  [floor ${floor.median.toFixed(2)} (rounds ${floor.min.toFixed(2)}–${floor.max.toFixed(2)})${held === undefined || within(floor.median, op, bound) ? "" : ", misses it too"}]`;
    console.log(
      `  ${label.padEnd(42)} ${r.median.toFixed(r.median < 0.1 ? 4 : 2).padStart(7)}${range}  ${verdict}${floorNote}`,
    );
    targets[label] = { ...r, bound, op, held, floor };
  }
  mkdirSync(join(root, "bench/results"), { recursive: true });
  writeFileSync(
    join(root, "bench/results/latest.json"),
    JSON.stringify(
      {
        date: new Date().toISOString(),
        settings: { SECONDS, ROUNDS, CONNECTIONS, PACED_CONNECTIONS, PACED_DELAY_MS, KEYS },
        summary: [...summary.values()],
        rounds: Object.fromEntries(order.map((t) => [t.name, results.get(t)])),
        paced: { ...pacedSummary, rounds: paced },
        targets,
      },
      null,
      2,
    ),
  );
  redis.disconnect();
  replicated.disconnect();
}

try {
  await main();
} finally {
  killAll();
}
