// `npm run bench`: tollgate on Redis against a bare undici passthrough and http-proxy +
// rate-limiter-flexible, all in front of the same upstream and the same Redis, driven with
// 1000 API keys in interleaved rounds on this machine. Prints req/s, p50, p99, the ratios and
// Redis commands per request. Figures are only comparable within one run.
//
// The machines this runs on drift: the same target can serve twice as fast a minute later. A
// ratio is therefore taken within each round, between targets measured back to back (the
// order puts each compared pair side by side), and the median and range of those per-round
// ratios are reported: many short rounds rather than a few long ones.
//
//   BENCH_SECONDS (default 4)  BENCH_ROUNDS (9)  BENCH_CONNECTIONS (64)
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import {
  freePort,
  hasWrk,
  KEYS,
  killAll,
  median,
  root,
  start,
  startBenchGateway,
  startPassthrough,
  startRedis,
  startUpstream,
  wrk,
} from "./support.mjs";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);

/**
 * Redis 7.0 counts the commands a script runs (GET, SET, TIME) like any other, so two figures:
 * `sent`, the commands clients sent (EVALSHA/EVAL: every target here only sends scripts), and
 * `all`, every command Redis executed, script internals included.
 */
async function redisCommandCalls(redis) {
  const info = await redis.info("commandstats");
  const calls = { sent: 0, all: 0 };
  for (const m of info.matchAll(/cmdstat_([\w|]+):calls=(\d+)/g)) {
    if (m[1] === "info") continue;
    calls.all += Number(m[2]);
    if (m[1] === "evalsha" || m[1] === "eval") calls.sent += Number(m[2]);
  }
  return calls;
}

/** Drives `url` for `seconds`; `flood` sends every request as one caller past its limit. */
async function load(url, seconds, flood = false) {
  if (hasWrk) {
    const j = wrk(url, seconds, CONNECTIONS, flood);
    return {
      rps: j.requests / j.seconds,
      p50: j.p50_ms,
      p99: j.p99_ms,
      requests: j.requests,
      errors: j.errors + j.non2xx,
    };
  }
  const { default: autocannon } = await import("autocannon");
  let i = 0;
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        path: "/v1/bench",
        setupRequest: (req) => ({
          ...req,
          headers: { "x-api-key": flood ? "flood-key" : `bench-key-${i++ % KEYS}` },
        }),
      },
    ],
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    errors: result.errors + result.non2xx,
  };
}

async function main() {
  const redisUrl = await startRedis();
  const redis = new Redis(redisUrl);
  await redis.ping();
  const upstream = await startUpstream();
  const single = await startBenchGateway({ storeUrl: redisUrl, upstream });
  const workers = await startBenchGateway({
    name: "tollgate-workers",
    storeUrl: redisUrl,
    upstream,
    workers: 2,
  });
  const passthrough = await startPassthrough(upstream);
  const peerPort = await freePort();
  await start(
    "http-proxy",
    process.execPath,
    [join(root, "bench/http-proxy-peer.mjs"), String(peerPort), upstream, redisUrl],
    (l) => l.includes("listening"),
  );

  // The flood (one caller far past its limit, against the single-process gateway) is a target
  // of its own. Compared pairs are neighbours in this order (forward and reversed alike):
  // peer–tollgate, tollgate–passthrough, passthrough–flood.
  const targets = [
    { name: "http-proxy + rate-limiter-flexible", url: `http://127.0.0.1:${peerPort}` },
    { name: "tollgate (Redis)", url: single.url },
    { name: "undici passthrough", url: passthrough.url },
    { name: "flood: tollgate, one caller denied", url: single.url, flood: true },
    { name: "tollgate (Redis, workers: 2)", url: workers.url },
  ];
  console.log(
    `load: ${hasWrk ? "wrk -t1" : "autocannon"}, ${CONNECTIONS} connections, ${KEYS} API keys, ${ROUNDS} rounds x ${SECONDS}s, interleaved`,
  );
  for (const t of targets) await load(t.url, 2, t.flood); // warm-up: JIT, pools, Redis scripts

  const results = new Map(targets.map((t) => [t.name, []]));
  const commands = new Map(targets.map((t) => [t.name, { sent: 0, all: 0, requests: 0 }]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const t of round % 2 ? targets : [...targets].reverse()) {
      const before = await redisCommandCalls(redis);
      const r = await load(t.url, SECONDS, t.flood);
      const after = await redisCommandCalls(redis);
      results.get(t.name).push(r);
      const c = commands.get(t.name);
      c.sent += after.sent - before.sent;
      c.all += after.all - before.all;
      c.requests += r.requests;
      console.log(
        `  round ${round} ${t.name.padEnd(36)} ${r.rps.toFixed(0).padStart(7)} req/s  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms  errors ${r.errors}`,
      );
    }
  }

  const summary = targets.map((t) => {
    const rs = results.get(t.name);
    const c = commands.get(t.name);
    return {
      target: t.name,
      rps: median(rs.map((r) => r.rps)),
      p50_ms: median(rs.map((r) => r.p50)),
      p99_ms: median(rs.map((r) => r.p99)),
      errors: rs.reduce((n, r) => n + r.errors, 0),
      redis_commands_sent_per_request: c.sent / c.requests,
      redis_commands_executed_per_request: c.all / c.requests,
    };
  });
  const [peer, tollgate, bare, flood, workers2] = summary;
  console.log("\nmedian of rounds:");
  for (const s of summary) {
    console.log(
      `  ${s.target.padEnd(36)} ${s.rps.toFixed(0).padStart(7)} req/s  p50 ${s.p50_ms.toFixed(2)} ms  p99 ${s.p99_ms.toFixed(2)} ms  Redis cmds sent/req ${s.redis_commands_sent_per_request.toFixed(4)} (executed ${s.redis_commands_executed_per_request.toFixed(2)})  non-2xx ${s.errors}`,
    );
  }
  /** Per round, a's req/s over b's: the median and range over the rounds. */
  const perRound = (a, b) => {
    const ra = results.get(a.target);
    const rb = results.get(b.target);
    const values = ra.map((r, i) => r.rps / rb[i].rps);
    return { median: median(values), min: Math.min(...values), max: Math.max(...values), rounds: values };
  };
  const ratios = {
    tollgate_vs_undici_passthrough: perRound(tollgate, bare),
    tollgate_vs_http_proxy_rlf: perRound(tollgate, peer),
    workers2_vs_workers1: perRound(workers2, tollgate),
    flood_denials_vs_undici_passthrough: perRound(flood, bare),
  };
  // Every flood request is a 429 (non-2xx): commands per denied request.
  const floodCommandsPerDenial = flood.redis_commands_sent_per_request;
  const show = (label, r, target) =>
    console.log(
      `${label.padEnd(46)} ${r.median.toFixed(2)}x  (rounds ${r.min.toFixed(2)}–${r.max.toFixed(2)}; ${target})`,
    );
  console.log("\nratios per round, median (range):");
  show("tollgate / undici passthrough:", ratios.tollgate_vs_undici_passthrough, "target >= 0.9");
  show("tollgate / http-proxy + rate-limiter-flexible:", ratios.tollgate_vs_http_proxy_rlf, "target >= 2");
  show("tollgate workers: 2 / workers: 1:", ratios.workers2_vs_workers1, "as measured");
  show(
    "flood denials / undici passthrough requests:",
    ratios.flood_denials_vs_undici_passthrough,
    "target >= 1",
  );
  console.log(
    `${"tollgate Redis commands sent per request:".padEnd(46)} ${tollgate.redis_commands_sent_per_request.toFixed(3)}  (target <= 1)`,
  );
  console.log(
    `${"flood Redis commands per denied request:".padEnd(46)} ${floodCommandsPerDenial.toFixed(4)}  (target <= 0.01)`,
  );
  mkdirSync(join(root, "bench/results"), { recursive: true });
  writeFileSync(
    join(root, "bench/results/latest.json"),
    JSON.stringify(
      {
        date: new Date().toISOString(),
        summary,
        ratios,
        flood_redis_commands_per_denial: floodCommandsPerDenial,
      },
      null,
      2,
    ),
  );
  redis.disconnect();
}

try {
  await main();
} finally {
  killAll();
}
