// `npm run bench:keys` (builds first): a gateway's memory with 100,000 keys issued at runtime is
// bounded by its key cache (`keys.cache`), not by how many keys the store holds. The keys are
// written straight into a private redis-server in the layout operator-state/api-keys.ts uses, then every key
// is presented twice (from 5,000 addresses behind a trusted proxy, so the per-address lookup
// throttle lets each first lookup through). The gateway runs in this process (started with
// --expose-gc by the npm script), so the V8 heap is read after a full collection: live objects
// only, the bench's own 100,000 keys included in every figure. Run with several caches:
//
//   BENCH_KEYS (100000)        stored keys
//   BENCH_KEYS_CACHE (10000)   keys.cache of the gateway
import { mkdtempSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { Gateway } from "../dist/gateway/index.js";
import {
  clientKeysKey,
  fieldsOf,
  keyHashKey,
  keyIdKey,
  newKey,
  newKeyId,
  sha256Hex,
} from "../dist/operator-state/api-keys.js";
import { freePort, killAll, startRedis, startUpstream } from "./support.mjs";

const KEYS = Number(process.env.BENCH_KEYS ?? 100_000);
const CACHE = Number(process.env.BENCH_KEYS_CACHE ?? 10_000);
const PREFIX = "bench:";
/** Keys presented per client address: the lookup throttle's burst. */
const PER_ADDRESS = 20;

function get(url, headers = {}, agent = undefined) {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, agent }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
    req.end();
  });
}

function memory() {
  if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc");
  globalThis.gc();
  globalThis.gc();
  const m = process.memoryUsage();
  return { rssMb: m.rss / 2 ** 20, heapMb: m.heapUsed / 2 ** 20 };
}

async function present(url, keys) {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const statuses = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < keys.length) {
        const i = next++;
        const address = `10.${(i / PER_ADDRESS) >> 16}.${((i / PER_ADDRESS) >> 8) & 255}.${Math.floor(i / PER_ADDRESS) & 255}`;
        const r = await get(`${url}/x`, { "x-api-key": keys[i], "x-forwarded-for": address }, agent);
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      }
    }),
  );
  agent.destroy();
  return statuses;
}

try {
  const storeUrl = await startRedis();
  const upstream = await startUpstream();
  const redis = new Redis(storeUrl);
  const keys = [];
  let pipeline = redis.pipeline();
  for (let i = 0; i < KEYS; i++) {
    const key = newKey();
    const hash = sha256Hex(key);
    const id = newKeyId();
    const client = `customer-${i % 100}`;
    const record = {
      id,
      hash,
      client,
      plan: "pro",
      tenant: undefined,
      limits: undefined,
      createdAtMs: Date.now(),
      expiresAtMs: undefined,
    };
    pipeline.hset(keyHashKey(PREFIX, hash), ...fieldsOf(record));
    pipeline.set(keyIdKey(PREFIX, id), hash);
    pipeline.sadd(clientKeysKey(PREFIX, client), id);
    keys.push(key);
    if (pipeline.length >= 3000) {
      await pipeline.exec();
      pipeline = redis.pipeline();
    }
  }
  await pipeline.exec();
  const port = await freePort();
  const adminPort = await freePort();
  const config = join(mkdtempSync(join(tmpdir(), "tollgate-bench-")), "gateway.yaml");
  writeFileSync(
    config,
    `listen: 127.0.0.1:${port}
admin: { listen: 127.0.0.1:${adminPort} }
log: { level: warn, requests: false }
store: { url: ${storeUrl}, prefix: "${PREFIX}", on_failure: open }
identity: { trusted_proxies: [127.0.0.1/32], auth_failures: false }
keys: { cache: ${CACHE} }
upstreams: { api: ${upstream} }
plans: { pro: { global: { rate: 1000000/s, burst: 1000000 } } }
routes: [{ name: api, match: { path: / }, upstream: api }]
`,
  );
  const gateway = await Gateway.start({ configFile: config, watch: false });
  const url = `http://127.0.0.1:${port}`;
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  await present(url, keys.slice(0, 100));
  const base = memory();
  console.log(`${KEYS} stored keys, keys.cache ${CACHE}`);
  console.log(`  after 100 keys:   RSS ${base.rssMb.toFixed(0)} MB, heap ${base.heapMb.toFixed(0)} MB`);
  for (const pass of [1, 2]) {
    const started = performance.now();
    const statuses = await present(url, keys);
    const m = memory();
    console.log(
      `  after pass ${pass} (all ${KEYS} keys, ${((performance.now() - started) / 1000).toFixed(1)} s, ${JSON.stringify(statuses)}): RSS ${m.rssMb.toFixed(0)} MB, heap ${m.heapMb.toFixed(0)} MB`,
    );
  }
  const lookups = /tollgate_key_lookups_total\{result="found"\} (\S+)/.exec(
    (await get(`${adminUrl}/metrics`)).body,
  )?.[1];
  const per = (memory().heapMb - base.heapMb) * 2 ** 20;
  console.log(
    `  store lookups (found): ${lookups}; heap above the start: ${(per / 1024).toFixed(0)} KB, ${(per / Math.min(CACHE, KEYS)).toFixed(0)} bytes per cached key`,
  );
  redis.disconnect();
  await gateway.stop(0);
} finally {
  killAll();
}
