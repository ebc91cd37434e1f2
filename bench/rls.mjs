// Envoy's rate-limit service (rls) under load: one gateway process on a real Redis, a grpc-js
// client with Envoy's protos keeping RLS_CONCURRENCY calls in flight for RLS_SECONDS. Each call
// carries two descriptors, as Envoy's rate_limits actions usually send (a per-address limit and
// a per-path one); RLS_HOT is the share of calls from one address already over its limit (the
// deny cache answers those). Prints calls/s, latency percentiles, and the CPU the gateway and
// Redis spent per 1000 calls.
//
//   npm run bench:rls        RLS_SECONDS (10)  RLS_CONCURRENCY (64)  RLS_HOT (0.5)
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import Redis from "ioredis";
import { cpuSeconds, freePort, killAll, redisCounters, root, start, startRedis } from "./support.mjs";

const SECONDS = Number(process.env.RLS_SECONDS ?? 10);
const CONCURRENCY = Number(process.env.RLS_CONCURRENCY ?? 64);
const HOT = Number(process.env.RLS_HOT ?? 0.5);

const dir = mkdtempSync(join(tmpdir(), "tollgate-bench-rls-"));
writeFileSync(
  join(dir, "descriptors.yaml"),
  `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1000000 }
  - key: remote_address
    value: 10.9.9.9
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 1000000 }
`,
);

try {
  const redisUrl = await startRedis();
  const rlsPort = await freePort();
  writeFileSync(
    join(dir, "gateway.yaml"),
    `listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: ${redisUrl} }
upstreams: { api: { url: "http://127.0.0.1:9" } }
routes:
  - { name: default, match: { path: / }, upstream: api }
rls: { listen: 127.0.0.1:${rlsPort}, config: descriptors.yaml }
`,
  );
  const gateway = await start(
    "gateway",
    process.execPath,
    [join(root, "dist/cli.js"), "--config", join(dir, "gateway.yaml")],
    (line) => line.includes("tollgate listening"),
  );
  const redis = new Redis(redisUrl);
  const definition = protoLoader.loadSync("envoy/service/ratelimit/v3/rls.proto", {
    includeDirs: [join(root, "proto")],
    keepCase: true,
    longs: Number,
    enums: String,
  });
  const Service = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3.RateLimitService;
  const client = new Service(`127.0.0.1:${rlsPort}`, grpc.credentials.createInsecure());
  const ask = (ip) =>
    new Promise((resolve, reject) =>
      client.ShouldRateLimit(
        {
          domain: "edge",
          descriptors: [
            { entries: [{ key: "remote_address", value: ip }] },
            { entries: [{ key: "path", value: "/api/items" }] },
          ],
        },
        (err, res) => (err ? reject(err) : resolve(res)),
      ),
    );
  // Warm-up: connections, the script loaded, the hot address over its limit.
  for (let i = 0; i < 200; i++) await ask(`10.0.${i % 250}.1`);
  await ask("10.9.9.9");

  const cpu0 = cpuSeconds(gateway.pid);
  const redis0 = await redisCounters(redis);
  const latencies = [];
  const codes = { OK: 0, OVER_LIMIT: 0 };
  const until = Date.now() + SECONDS * 1000;
  let n = 0;
  const loop = async () => {
    while (Date.now() < until) {
      const hot = Math.random() < HOT;
      const ip = hot ? "10.9.9.9" : `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
      n++;
      const t0 = process.hrtime.bigint();
      const res = await ask(ip);
      latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      codes[res.overall_code]++;
    }
  };
  const t0 = Date.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  const elapsed = (Date.now() - t0) / 1000;
  const cpu = cpuSeconds(gateway.pid) - cpu0;
  const redis1 = await redisCounters(redis);
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))].toFixed(2);
  const calls = latencies.length;
  console.log(
    JSON.stringify({
      calls,
      calls_per_s: Math.round(calls / elapsed),
      ok: codes.OK,
      over_limit: codes.OVER_LIMIT,
      p50_ms: pct(0.5),
      p99_ms: pct(0.99),
      gateway_cpu_ms_per_1000: ((cpu / calls) * 1e6).toFixed(0),
      redis_cpu_ms_per_1000: (((redis1.seconds - redis0.seconds) / calls) * 1e6).toFixed(0),
      redis_scripts_per_call: ((redis1.scripts - redis0.scripts) / calls).toFixed(3),
      concurrency: CONCURRENCY,
      hot_share: HOT,
    }),
  );
  client.close();
  redis.disconnect();
} finally {
  killAll();
}
