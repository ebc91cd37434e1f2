// `npm run bench:callers`: a million distinct callers through one gateway instance (anonymous
// callers, each its own client IP behind a trusted proxy), to show the gateway's memory does
// not grow with the number of callers (state lives in Redis) and what each caller costs Redis.
// CALLERS (default 1,000,000) and CONCURRENCY (default 64) change the run; loopback only.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { Pool } from "undici";
import { freePort, killAll, root, start, startRedis, startUpstream } from "./support.mjs";

const CALLERS = Number(process.env.CALLERS ?? 1_000_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 64);

const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;
const usedMemory = async (redis) => Number(/used_memory:(\d+)/.exec(await redis.info("memory"))[1]);

/** The i-th caller's address: 10.0.0.0/8 holds 16.7 million. */
const ipOf = (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

try {
  const redisUrl = await startRedis();
  const redis = new Redis(redisUrl);
  const upstream = await startUpstream();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "tollgate-callers-"));
  const config = join(dir, "gateway.yaml");
  writeFileSync(
    config,
    `listen: 127.0.0.1:${port}
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: ${redisUrl}, timeout: 200ms }
upstreams: { api: ${upstream} }
identity: { trusted_proxies: [127.0.0.1/32] }
plans:
  anonymous: { global: { rate: 20/d, burst: 20 } }   # keys live for an hour: all are counted
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
  );
  const gateway = await start(
    "tollgate",
    process.execPath,
    [join(root, "dist/cli.js"), "--config", config],
    (l) => l.includes("tollgate listening"),
  );
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY });
  const one = async (i) => {
    const { statusCode, body } = await pool.request({
      path: "/v1/callers",
      method: "GET",
      headers: { "x-forwarded-for": ipOf(i) },
    });
    await body.dump();
    return statusCode;
  };

  // Warm-up, then the baseline.
  for (let i = 0; i < 2000; i++) await one(CALLERS + i);
  const rssStart = rssMb(gateway.pid);
  const redisStart = await usedMemory(redis);
  const keysStart = await redis.dbsize();
  const started = Date.now();
  let next = 0;
  let ok = 0;
  let peak = rssStart;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMb(gateway.pid));
    process.stdout.write(`\r  ${next.toLocaleString()} callers, RSS ${rssMb(gateway.pid).toFixed(1)} MB   `);
  }, 2000);
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < CALLERS) {
        const i = next++;
        if ((await one(i)) === 200) ok++;
      }
    }),
  );
  clearInterval(sampler);
  const seconds = (Date.now() - started) / 1000;
  const rssEnd = rssMb(gateway.pid);
  peak = Math.max(peak, rssEnd);
  const keys = (await redis.dbsize()) - keysStart;
  const redisBytes = (await usedMemory(redis)) - redisStart;
  const result = {
    callers: CALLERS,
    admitted: ok,
    seconds: Math.round(seconds),
    rps: Math.round(CALLERS / seconds),
    gateway_rss_mb: { start: +rssStart.toFixed(1), end: +rssEnd.toFixed(1), peak: +peak.toFixed(1) },
    redis_keys_added: keys,
    redis_bytes_per_caller: Math.round(redisBytes / CALLERS),
  };
  console.log(`\n${JSON.stringify(result, null, 2)}`);
  const passed = peak < 300 && ok === CALLERS;
  console.log(passed ? "callers run passed (RSS stayed under 300 MB)" : "callers run FAILED");
  await pool.close();
  redis.disconnect();
  process.exitCode = passed ? 0 : 1;
} finally {
  killAll();
}
