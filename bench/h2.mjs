// `npm run build && node bench/h2.mjs`: HTTP/2 requests/s beside HTTP/1.1 at the same load, on
// Redis, driven by h2load (nghttp2-client: `apt-get install nghttp2-client`) so that the one
// client speaks every protocol the same way. Two gateways on the same config and Redis, one on
// cleartext, one with `listen.tls`; 64 requests in flight on each target:
//
// - HTTP/1.1, cleartext: 64 connections;
// - HTTP/1.1 over TLS: 64 connections;
// - HTTP/2 over TLS, 64 connections of one stream each (the same shape as HTTP/1.1);
// - HTTP/2 over TLS, 8 connections of 8 streams each (how HTTP/2 clients multiplex).
//
// Rounds are interleaved and each ratio is taken within its round, against HTTP/1.1 over TLS
// measured just before (see bench/run.mjs on why): the median and range are printed.
//
//   BENCH_SECONDS (default 4)  BENCH_ROUNDS (7)
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  freePort,
  killAll,
  median,
  root,
  selfSignedCert,
  start,
  startRedis,
  startUpstream,
} from "./support.mjs";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);

if (spawnSync("h2load", ["--version"]).error) {
  console.error("bench/h2.mjs needs h2load on PATH (Debian: apt-get install nghttp2-client)");
  process.exit(1);
}

/** A gateway on `listen` (a string or a TLS mapping) with one caller whose plan never denies. */
async function startGateway(name, listen, storeUrl, upstream) {
  const config = join(mkdtempSync(join(tmpdir(), "tollgate-bench-h2-")), "gateway.yaml");
  writeFileSync(
    config,
    `listen: ${listen}
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: ${storeUrl}, timeout: 100ms, on_failure: open }
upstreams: { api: ${upstream} }
clients:
  - { id: bench, key: bench-key, plan: bench }
plans:
  bench: { global: { rate: 1000000/s, burst: 1000000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
  );
  await start(name, process.execPath, [join(root, "dist/cli.js"), "--config", config], (l) =>
    l.includes("tollgate listening"),
  );
}

/** One h2load run; its req/s, and how many requests did not succeed. */
function h2load(url, args) {
  const r = spawnSync(
    "h2load",
    ["-D", String(SECONDS), "--warm-up-time=1", "-H", "x-api-key: bench-key", ...args, url],
    { encoding: "utf8" },
  );
  const rps = /finished in [\d.]+\w+, ([\d.]+) req\/s/.exec(r.stdout);
  const done =
    /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(
      r.stdout,
    );
  const status = /status codes: (\d+) 2xx/.exec(r.stdout);
  if (!rps || !done) throw new Error(`h2load failed: ${r.stderr}${r.stdout}`);
  return { rps: Number(rps[1]), failed: Number(done[3]) + Number(done[4]), ok2xx: Number(status?.[1] ?? 0) };
}

async function main() {
  const redisUrl = await startRedis();
  const upstream = await startUpstream();
  const dir = mkdtempSync(join(tmpdir(), "tollgate-bench-tls-"));
  selfSignedCert(dir);
  const cleartext = await freePort();
  await startGateway("tollgate (cleartext)", `127.0.0.1:${cleartext}`, redisUrl, upstream);
  const tls = await freePort();
  await startGateway(
    "tollgate (TLS)",
    `{ address: "127.0.0.1:${tls}", tls: { cert_file: ${join(dir, "tls.crt")}, key_file: ${join(dir, "tls.key")} } }`,
    redisUrl,
    upstream,
  );
  const targets = [
    {
      name: "HTTP/1.1 cleartext, 64 connections",
      url: `http://127.0.0.1:${cleartext}/v1/bench`,
      args: ["--h1", "-c", "64", "-m", "1"],
    },
    {
      name: "HTTP/1.1 over TLS, 64 connections",
      url: `https://127.0.0.1:${tls}/v1/bench`,
      args: ["--h1", "-c", "64", "-m", "1"],
    },
    {
      name: "HTTP/2 over TLS, 64 connections x 1 stream",
      url: `https://127.0.0.1:${tls}/v1/bench`,
      args: ["-c", "64", "-m", "1"],
    },
    {
      name: "HTTP/2 over TLS, 8 connections x 8 streams",
      url: `https://127.0.0.1:${tls}/v1/bench`,
      args: ["-c", "8", "-m", "8"],
    },
  ];
  console.log(
    `load: h2load, 64 requests in flight, one API key, Redis store, ${ROUNDS} rounds x ${SECONDS}s, interleaved`,
  );
  const results = new Map(targets.map((t) => [t.name, []]));
  const ratios = new Map(targets.map((t) => [t.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    // Forward and reversed in turn, so no target always runs first.
    const order = round % 2 ? [...targets].reverse() : targets;
    const byName = {};
    for (const t of order) {
      const r = h2load(t.url, t.args);
      if (r.failed > 0) console.warn(`${t.name}: ${r.failed} requests failed`);
      byName[t.name] = r.rps;
      results.get(t.name).push(r.rps);
    }
    const base = byName[targets[1].name];
    for (const t of targets) ratios.get(t.name).push(byName[t.name] / base);
  }
  console.log("target | req/s (median) | ratio to HTTP/1.1 over TLS (median, range)");
  for (const t of targets) {
    const r = ratios.get(t.name);
    console.log(
      `${t.name} | ${Math.round(median(results.get(t.name)))} | ${median(r).toFixed(2)}x (${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)})`,
    );
  }
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(killAll);
