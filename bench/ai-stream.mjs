// `npm run bench:ai`: what charging from the response costs an AI endpoint, against the fake
// OpenAI-compatible upstream the e2e tests use (test/support/llm-upstream.ts, transpiled here
// with the TypeScript the repository already has). One gateway on its own Redis, every caller
// with a monthly token budget (`unit: tokens`, never exhausted), and four routes to the same
// upstream:
//
//   ai      ai: openai      the request body read (model, ceiling, prompt bound) and written
//                           (max_completion_tokens, include_usage), its reservation taken in the
//                           check and settled to the usage read as the answer passes
//   usage   charge: usage   tokens read from the body or the stream's events as they pass
//   header  charge: header  Tollgate-Cost in the response head (charged before the head leaves)
//   cost    charge: header  no Tollgate-Cost sent: only the route's cost, taken up front
//
// Part 2 also counts Redis's script calls per request of each route (INFO commandstats): a
// reservation is taken in the request's one check, and settled in one call as a post-charge is.
//
// 1. Latency, one stream at a time: BENCH_AI_STREAMS streamed completions of BENCH_AI_EVENTS
//    events BENCH_AI_DELAY_MS apart, straight to the upstream and through each route,
//    interleaved. Each event carries the time it left the upstream; the bench (one process,
//    one clock) subtracts it from its arrival: first event and every event, p50 and p99.
// 2. Throughput: JSON completions (30 tokens each in the body; Tollgate-Cost: 30 in the head on
//    the header route) driven by wrk, BENCH_AI_ROUNDS interleaved rounds of
//    BENCH_AI_SECONDS per route: req/s and the gateway's CPU per request (/proc), with the
//    ratios within each round (median and range).
// 3. A BENCH_AI_FLOOD_MB stream of small events through usage and header: MB/s.
// Linux and wrk only; loopback only.
//
//   BENCH_AI_STREAMS (50)  BENCH_AI_EVENTS (20)  BENCH_AI_DELAY_MS (10)  BENCH_AI_ROUNDS (5)
//   BENCH_AI_SECONDS (3)  BENCH_CONNECTIONS (64)  BENCH_AI_FLOOD_MB (100)
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Redis } from "ioredis";
import ts from "typescript";
import {
  cpuSeconds,
  freePort,
  hasWrk,
  killAll,
  median,
  redisCounters,
  root,
  start,
  startRedis,
} from "./support.mjs";

const STREAMS = Number(process.env.BENCH_AI_STREAMS ?? 50);
const EVENTS = Number(process.env.BENCH_AI_EVENTS ?? 20);
const DELAY_MS = Number(process.env.BENCH_AI_DELAY_MS ?? 10);
const ROUNDS = Number(process.env.BENCH_AI_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_AI_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const FLOOD_MB = Number(process.env.BENCH_AI_FLOOD_MB ?? 100);
const KEYS = 100;

if (!hasWrk) {
  console.error("bench:ai needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), "tollgate-bench-ai-"));

/** test/support/llm-upstream.ts as a module this Node runs (it imports node: built-ins only). */
async function loadLlmUpstream() {
  const source = readFileSync(join(root, "test/support/llm-upstream.ts"), "utf8");
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  const file = join(dir, "llm-upstream.mjs");
  writeFileSync(file, outputText);
  return import(pathToFileURL(file).href);
}

const ROUTES = {
  ai: "/ai/v1/chat/completions",
  usage: "/v1/chat/completions",
  header: "/by-header/v1/chat/completions",
  cost: "/cost-only/v1/chat/completions",
};

async function startGateway(storeUrl, upstreamUrl) {
  const port = await freePort();
  const adminPort = await freePort();
  const clients = Array.from(
    { length: KEYS },
    (_, i) => `  - { id: bench-${i}, key: bench-key-${i}, plan: ai, tenant: t-${i} }`,
  );
  const config = join(dir, "gateway.yaml");
  writeFileSync(
    config,
    `listen: 127.0.0.1:${port}
admin: { listen: 127.0.0.1:${adminPort} }
log: { level: info, requests: false }
calendar: { tz: UTC }
store: { url: ${storeUrl}, timeout: 100ms, on_failure: open }
upstreams: { llm: { url: ${upstreamUrl}, timeout: 10m } }
clients:
${clients.join("\n")}
plans:
  ai:
    global: { rate: 1000000/s, burst: 1000000 }
    tenant: { algorithm: fixed_window, limit: 1000000000000, window: 1 month, unit: tokens }
routes:
  - { name: ai, match: { path: /ai }, upstream: llm, ai: { format: openai, max_output: 1000 } }
  - { name: usage, match: { path: ${ROUTES.usage} }, upstream: llm, charge: usage }
  - { name: header, match: { path: /by-header }, upstream: llm, charge: header }
  - { name: cost, match: { path: /cost-only }, upstream: llm, charge: header }
`,
  );
  const child = await start(
    "tollgate",
    process.execPath,
    [join(root, "dist/cli.js"), "--config", config],
    (l) => l.includes("tollgate listening"),
  );
  return {
    pid: child.pid,
    url: `http://127.0.0.1:${port}`,
    metrics: `http://127.0.0.1:${adminPort}/metrics`,
  };
}

const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** Part 1: first-event and per-event latency, direct and through each route. */
async function latency(llm, upstreamUrl, gatewayUrl) {
  const targets = [
    ["direct", upstreamUrl, ROUTES.usage],
    ["ai", gatewayUrl, ROUTES.ai],
    ["usage", gatewayUrl, ROUTES.usage],
    ["header", gatewayUrl, ROUTES.header],
    ["cost", gatewayUrl, ROUTES.cost],
  ];
  const first = new Map(targets.map(([n]) => [n, []]));
  const every = new Map(targets.map(([n]) => [n, []]));
  // From the client sending its request to its first event: what reading the body and
  // reserving add before the upstream is even asked.
  const ttft = new Map(targets.map(([n]) => [n, []]));
  const { Agent } = await import("node:http");
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < STREAMS + 5; i++) {
    for (const [name, base, path] of i % 2 ? targets : [...targets].reverse()) {
      const askedAt = performance.timeOrigin + performance.now();
      const r = await llm.readStream(base, {
        path,
        agent,
        headers: {
          "x-api-key": `bench-key-${i % KEYS}`,
          "x-test-events": String(EVENTS),
          "x-test-delay-ms": String(DELAY_MS),
          // The header route gets its Tollgate-Cost in the head: its head waits for the charge.
          ...(name === "header" ? { "x-test-cost": "30" } : {}),
        },
        body: { model: "fake-model", stream: true, messages: [{ role: "user", content: "hi" }] },
      });
      if (r.status !== 200 || !r.complete) throw new Error(`${name}: ${r.status}, complete ${r.complete}`);
      if (i < 5) continue; // warm-up
      const timed = r.events.filter((e) => Number.isFinite(e.sentAt));
      first.get(name).push(timed[0].arrivedAt - timed[0].sentAt);
      ttft.get(name).push(timed[0].arrivedAt - askedAt);
      for (const e of timed) every.get(name).push(e.arrivedAt - e.sentAt);
    }
  }
  agent.destroy();
  console.log(
    `\n1. latency: ${STREAMS} streams per target, ${EVENTS} events ${DELAY_MS} ms apart, one at a time (ms from leaving the upstream to arriving at the client)`,
  );
  console.log(
    "| target | request → first event p50 | first event p50 | first event p99 | every event p50 | every event p99 | added p50 (request → first / first / every) |",
  );
  console.log("| --- | --: | --: | --: | --: | --: | --: |");
  const t1 = median(ttft.get("direct"));
  const d1 = median(first.get("direct"));
  const dAll = median(every.get("direct"));
  for (const [name] of targets) {
    const f = first.get(name);
    const e = every.get(name);
    const t = ttft.get(name);
    console.log(
      `| ${name} | ${median(t).toFixed(2)} | ${median(f).toFixed(2)} | ${percentile(f, 99).toFixed(2)} | ${median(e).toFixed(2)} | ${percentile(e, 99).toFixed(2)} | ${name === "direct" ? "" : `${(median(t) - t1).toFixed(2)} / ${(median(f) - d1).toFixed(2)} / ${(median(e) - dAll).toFixed(2)}`} |`,
    );
  }
}

/** One wrk load of JSON completions on `path` (with Tollgate-Cost: 30 in the head when `cost`). */
async function wrkJson(url, path, seconds, cost) {
  const script = join(dir, "ai.lua");
  writeFileSync(
    script,
    `local i = 0
local body = '{"model":"fake-model","stream":false,"messages":[{"role":"user","content":"hi"}]}'
request = function()
  i = (i + 1) % ${KEYS}
  return wrk.format("POST", "${path}", {
    ["x-api-key"] = "bench-key-" .. i, ["content-type"] = "application/json",
    ["x-test-tokens"] = "10,20"${cost ? ', ["x-test-cost"] = "30"' : ""} }, body)
end
done = function(summary, latency, requests)
  io.write(string.format('BENCH {"requests":%d,"seconds":%.3f,"errors":%d,"non2xx":%d,"p99_ms":%.3f}\\n',
    summary.requests, summary.duration / 1e6,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(99) / 1000))
end
`,
  );
  // Not spawnSync: the upstream runs in this process, and must keep answering meanwhile.
  const child = spawn("wrk", ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "-s", script, url]);
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  child.stderr.on("data", (d) => {
    out += d;
  });
  await new Promise((resolve) => child.on("exit", resolve));
  const line = out.split("\n").find((l) => l.startsWith("BENCH "));
  if (!line) throw new Error(`wrk failed: ${out}`);
  return JSON.parse(line.slice(6));
}

/** The units the gateway has charged per route so far (tollgate_charged_units_total). */
async function chargedUnits(metricsUrl) {
  const text = await (await fetch(metricsUrl)).text();
  const out = {};
  for (const m of text.matchAll(/^tollgate_charged_units_total\{route="([^"]+)"\} (\d+)/gm))
    out[m[1]] = Number(m[2]);
  return out;
}

/** Part 2: req/s, gateway CPU and Redis script calls per request for JSON completions, per route. */
async function throughput(gateway, redis) {
  const names = ["ai", "usage", "header", "cost"];
  for (const n of names) await wrkJson(gateway.url, ROUTES[n], 1, n === "header"); // warm-up
  console.log(
    `\n2. JSON completions: wrk -t1 -c${CONNECTIONS}, ${KEYS} API keys, ${ROUNDS} rounds x ${SECONDS} s, interleaved`,
  );
  const runs = new Map(names.map((n) => [n, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    const row = {};
    for (const n of round % 2 ? names : [...names].reverse()) {
      const units0 = await chargedUnits(gateway.metrics);
      const redis0 = await redisCounters(redis);
      const cpu0 = cpuSeconds(gateway.pid);
      const j = await wrkJson(gateway.url, ROUTES[n], SECONDS, n === "header");
      const cpu1 = cpuSeconds(gateway.pid);
      // Settlements land when each answer ends: let the last ones in before counting.
      await new Promise((r) => setTimeout(r, 200));
      const redis1 = await redisCounters(redis);
      const units1 = await chargedUnits(gateway.metrics);
      const r = {
        rps: j.requests / j.seconds,
        cpuUs: ((cpu1 - cpu0) * 1e6) / j.requests,
        p99: j.p99_ms,
        failures: j.errors + j.non2xx,
        unitsPerRequest: ((units1[n] ?? 0) - (units0[n] ?? 0)) / j.requests,
        scriptsPerRequest: (redis1.scripts - redis0.scripts) / j.requests,
        redisUs: ((redis1.seconds - redis0.seconds) * 1e6) / j.requests,
      };
      runs.get(n).push(r);
      row[n] = r;
    }
    console.log(
      `  round ${round}: ${names.map((n) => `${n} ${row[n].rps.toFixed(0)} req/s ${row[n].cpuUs.toFixed(0)} µs CPU/req`).join("   ")}`,
    );
  }
  console.log(
    "| route | req/s | p99 ms | gateway CPU µs/req | Redis CPU µs/req | Redis script calls/req | units charged/req | failures |",
  );
  console.log("| --- | --: | --: | --: | --: | --: | --: | --: |");
  for (const n of names) {
    const rs = runs.get(n);
    console.log(
      `| ${n} | ${median(rs.map((r) => r.rps)).toFixed(0)} | ${median(rs.map((r) => r.p99)).toFixed(1)} | ${median(rs.map((r) => r.cpuUs)).toFixed(1)} | ${median(rs.map((r) => r.redisUs)).toFixed(1)} | ${median(rs.map((r) => r.scriptsPerRequest)).toFixed(2)} | ${median(rs.map((r) => r.unitsPerRequest)).toFixed(1)} | ${rs.reduce((s, r) => s + r.failures, 0)} |`,
    );
  }
  const ratio = (a, b, f) => {
    const xs = runs.get(a).map((r, i) => f(r) / f(runs.get(b)[i]));
    return `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
  };
  console.log("\nratios within each round, median (range):");
  console.log("| | req/s | gateway CPU/req |");
  console.log("| --- | --: | --: |");
  for (const [a, b] of [
    ["ai", "usage"],
    ["usage", "header"],
    ["usage", "cost"],
    ["header", "cost"],
  ])
    console.log(`| ${a} / ${b} | ${ratio(a, b, (r) => r.rps)} | ${ratio(a, b, (r) => r.cpuUs)} |`);
}

/** Part 3: a big stream of small events through usage and header. */
async function flood(llm, gatewayUrl) {
  console.log(`\n3. one stream of ${FLOOD_MB} MB of ~1 kB events`);
  for (const name of ["usage", "header", "usage", "header"]) {
    const started = performance.now();
    const r = await llm.readStream(gatewayUrl, {
      path: ROUTES[name],
      headers: { "x-api-key": "bench-key-0", "x-test-mode": "flood", "x-test-flood-mb": String(FLOOD_MB) },
      body: { model: "fake-model", stream: true },
      timeoutMs: 600_000,
    });
    const s = (performance.now() - started) / 1000;
    console.log(
      `  ${name.padEnd(6)} ${(r.bytes / 1024 / 1024 / s).toFixed(0)} MB/s (${s.toFixed(2)} s, complete ${r.complete})`,
    );
  }
}

async function main() {
  const llm = await loadLlmUpstream();
  const upstream = await llm.startLlmUpstream();
  const storeUrl = await startRedis();
  const redis = new Redis(storeUrl);
  const gateway = await startGateway(storeUrl, upstream.url);
  try {
    await latency(llm, upstream.url, gateway.url);
    await throughput(gateway, redis);
    await flood(llm, gateway.url);
  } finally {
    redis.disconnect();
    await upstream.close();
  }
}

try {
  await main();
} finally {
  killAll();
}
