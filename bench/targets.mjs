// `node bench/targets.mjs` (after `npm run build`): what an upstream of several targets costs at
// full load against one of a single URL. Three gateways on memory:// with the same plan, whose
// upstream is
//
//   one URL        `api: http://…`, the path as it was before targets
//   one target     `targets: [that URL]`, retries: 2, health checks every second: the balancer,
//                  passive health, the retry budget and the checks, on the same single upstream
//   three targets  three upstream processes, weights 1:1:2, retries and checks as above
//
// driven by wrk in interleaved rounds; reports the median of the per-round ratios against one
// URL of req/s and of the gateway's CPU per request (user + system from /proc, every thread).
// "one target" is the cost of the code; "three targets" adds two more upstream processes that
// share the machine's cores with the gateway and wrk. Linux and wrk only.
//
//   BENCH_ROUNDS (9)  BENCH_SECONDS (2)  BENCH_CONNECTIONS (64)
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  cpuSeconds,
  freePort,
  hasWrk,
  KEYS,
  killAll,
  median,
  root,
  start,
  startUpstream,
  wrk,
} from "./support.mjs";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);

if (!hasWrk) {
  console.error("bench/targets.mjs needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}

function measure(target) {
  const before = cpuSeconds(target.child.pid);
  const j = wrk(target.url, SECONDS, CONNECTIONS);
  return { rps: j.requests / j.seconds, cpuUs: ((cpuSeconds(target.child.pid) - before) * 1e6) / j.requests };
}

/** A gateway with the bench's API keys on a plan that never denies, and `upstream` as written. */
async function gateway(name, upstream) {
  const port = await freePort();
  const clients = Array.from(
    { length: KEYS },
    (_, i) => `  - { id: bench-${i}, key: bench-key-${i}, plan: bench }`,
  );
  const config = join(mkdtempSync(join(tmpdir(), "tollgate-bench-")), "gateway.yaml");
  writeFileSync(
    config,
    `listen: 127.0.0.1:${port}
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: memory:// }
upstreams:
  api: ${upstream}
clients:
${clients.join("\n")}
plans:
  bench: { global: { rate: 1000000/s, burst: 1000000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
  );
  const child = await start(name, process.execPath, [join(root, "dist/cli.js"), "--config", config], (l) =>
    l.includes("tollgate listening"),
  );
  return { name, child, url: `http://127.0.0.1:${port}` };
}

async function main() {
  const [u1, u2, u3] = await Promise.all([startUpstream(), startUpstream(), startUpstream()]);
  const checked = "retries: 2, health: { path: /, interval: 1s }";
  const single = await gateway("one URL", u1);
  const gateways = [
    single,
    await gateway("one target", `{ targets: [${u1}], ${checked} }`),
    await gateway("three targets", `{ targets: [${u1}, ${u2}, { url: "${u3}", weight: 2 }], ${checked} }`),
  ];
  for (const g of gateways) wrk(g.url, SECONDS, CONNECTIONS); // warm-up: JIT, pools

  console.log(`against one URL: ${ROUNDS} rounds of ${SECONDS} s each, wrk -c${CONNECTIONS}`);
  const ratios = new Map(gateways.slice(1).map((g) => [g, { rps: [], cpu: [] }]));
  for (let i = 0; i < ROUNDS; i++) {
    // Rotate the order, so none always runs on a machine another just warmed.
    const order = gateways.map((_, k) => gateways[(k + i) % gateways.length]);
    const m = new Map(order.map((g) => [g, measure(g)]));
    const s = m.get(single);
    for (const [g, r] of ratios) {
      r.rps.push(m.get(g).rps / s.rps);
      r.cpu.push(m.get(g).cpuUs / s.cpuUs);
    }
    console.log(
      `  round ${i + 1}: ${gateways.map((g) => `${g.name} ${m.get(g).rps.toFixed(0).padStart(6)} req/s ${m.get(g).cpuUs.toFixed(0).padStart(4)} µs CPU/req`).join("   ")}`,
    );
  }
  console.log("\nmedian of rounds, against one URL:");
  for (const [g, r] of ratios)
    console.log(
      `  ${g.name.padEnd(13)} ${median(r.rps).toFixed(2)}x the req/s, ${median(r.cpu).toFixed(2)}x the gateway CPU per request`,
    );
}

try {
  await main();
} finally {
  killAll();
}
