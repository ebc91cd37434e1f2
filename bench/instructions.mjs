// `npm run bench:instructions`: user-space instructions per request (valgrind's callgrind) of
// tollgate and of the bare undici passthrough, each run alone under valgrind in front of the same
// upstream. Instructions do not depend on what else the machine runs, so a change to the request
// path shows here when the CPU-time benches cannot tell it from the noise of a shared machine.
// They are not cycles (cache misses, mispredicted branches and the kernel's share are not in
// them): a ratio here is a lower bound of the CPU ratio `npm run bench` measures.
//
// Each process serves WARM requests (the JIT settles), its counters are zeroed, it serves COUNT
// more from a client with CONCURRENCY connections, and the instructions of those are divided by
// COUNT. The JIT's timing still moves a figure by about 1 % between runs (measured: 410–418 k per
// request over four runs of one build); compare builds over several runs.
//
//   BENCH_INSTRUCTIONS_LIMITS (none): none, or redis (the bench's two token buckets per caller,
//     on a Redis of its own, and the floor measured beside them)
//   BENCH_INSTRUCTIONS_WARM (3000)  BENCH_INSTRUCTIONS_COUNT (3000)  BENCH_CONNECTIONS (4)
//   BENCH_GATEWAY_CLI: another build's cli.js, measured in place of dist/cli.js
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Pool } from "undici";
import {
  freePort,
  KEYS,
  killAll,
  root,
  startRedis,
  startUpstream,
  writeBenchGatewayConfig,
} from "./support.mjs";

const LIMITS = process.env.BENCH_INSTRUCTIONS_LIMITS ?? "none";
const WARM = Number(process.env.BENCH_INSTRUCTIONS_WARM ?? 3000);
const COUNT = Number(process.env.BENCH_INSTRUCTIONS_COUNT ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_CONNECTIONS ?? 4);

if (spawnSync("valgrind", ["--version"]).error !== undefined) {
  console.error("bench:instructions needs valgrind on PATH (apt-get install valgrind)");
  process.exit(2);
}
if (!["none", "redis"].includes(LIMITS)) {
  console.error("BENCH_INSTRUCTIONS_LIMITS is none or redis");
  process.exit(2);
}

/** COUNT (or `n`) GET requests with the bench's keys, CONCURRENCY at a time; each must be a 200. */
async function drive(url, n) {
  const pool = new Pool(url, { connections: CONCURRENCY });
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const r = await pool.request({
        path: "/v1/bench",
        method: "GET",
        headers: { "x-api-key": `bench-key-${i % KEYS}` },
      });
      await r.body.dump();
      if (r.statusCode !== 200) throw new Error(`${url}: status ${r.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  await pool.close();
}

/** Until `url` answers (valgrind starts Node slowly). */
async function ready(url, child) {
  for (let i = 0; i < 240; i++) {
    if (child.exitCode !== null) throw new Error(`${url}: exited with ${child.exitCode}`);
    try {
      await drive(url, 1);
      return;
    } catch {
      await sleep(500);
    }
  }
  throw new Error(`${url}: not serving after 120 s under valgrind`);
}

/** Instructions per request of `args` (a Node program listening on `port`) under callgrind. */
async function measure(name, port, args) {
  const dir = mkdtempSync(join(tmpdir(), `tollgate-callgrind-${name}-`));
  const child = spawn(
    "valgrind",
    ["--tool=callgrind", `--callgrind-out-file=${dir}/out.%p`, "--dump-instr=no", process.execPath, ...args],
    { stdio: ["ignore", "ignore", "pipe"], cwd: root },
  );
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await ready(url, child);
    await drive(url, WARM);
    spawnSync("callgrind_control", ["-z", String(child.pid)]);
    await drive(url, COUNT);
    // The dump after zeroing holds exactly the measured requests (and what ran meanwhile).
    spawnSync("callgrind_control", ["-d", String(child.pid)]);
  } catch (err) {
    throw new Error(`${err.message}\n${stderr}`);
  } finally {
    child.kill("SIGKILL");
  }
  const dump = readdirSync(dir).find((f) => /^out\.\d+\.1$/.test(f));
  if (!dump) throw new Error(`${name}: callgrind wrote no dump in ${dir}`);
  const summary = /^summary: (\d+)/m.exec(readFileSync(join(dir, dump), "utf8"));
  return Number(summary[1]) / COUNT;
}

try {
  const upstream = await startUpstream();
  const storeUrl = await startRedis();
  const passPort = await freePort();
  const pass = await measure("passthrough", passPort, [
    join(root, "bench/passthrough.mjs"),
    String(passPort),
    upstream,
  ]);
  const gwPort = await freePort();
  const cli = process.env.BENCH_GATEWAY_CLI ?? join(root, "dist/cli.js");
  const config = writeBenchGatewayConfig({ port: gwPort, storeUrl, upstream, limited: LIMITS === "redis" });
  const gw = await measure("tollgate", gwPort, [cli, "--config", config]);
  // With limits on Redis, the floor too (bench/floor-peer.mjs: the passthrough and one batched
  // read and write of the caller's two keys per request): what tollgate adds to the least.
  let floor;
  if (LIMITS === "redis") {
    const floorPort = await freePort();
    floor = await measure("floor", floorPort, [
      join(root, "bench/floor-peer.mjs"),
      String(floorPort),
      upstream,
      storeUrl,
    ]);
  }
  console.log(
    `instructions per request (callgrind, ${COUNT} requests after ${WARM}, ${CONCURRENCY} connections):`,
  );
  console.log(`  undici passthrough       ${Math.round(pass)}`);
  if (floor !== undefined)
    console.log(
      `  floor                    ${Math.round(floor)}  (${(floor / pass).toFixed(3)}× the passthrough)`,
    );
  const againstFloor = floor === undefined ? "" : `, ${(gw / floor).toFixed(3)}× the floor`;
  console.log(
    `  tollgate, limits: ${LIMITS.padEnd(6)} ${Math.round(gw)}  (${(gw / pass).toFixed(3)}× the passthrough${againstFloor})`,
  );
} finally {
  killAll();
}
