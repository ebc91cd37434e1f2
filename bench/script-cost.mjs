// `npm run bench:script`: what check.lua costs Redis per request, without the machine's noise.
// A gateway on its own Redis serves the bench's load (1000 API keys, two token buckets each) for
// a second while MONITOR records every check.lua call it sends; those calls are then replayed,
// with their deadlines cleared, against a fresh Redis, alone on the machine, and Redis's own time
// per request is reported (INFO commandstats: the script's execution; INFO cpu: all of Redis,
// parsing and replies included), median of several passes.
//
// Then what each command a script may use costs it on that idle Redis, per key: the floor under
// any script that writes one key per limit (docs/scaling.md).
//
// BENCH_SCRIPT_FILES: a comma-separated list of other Lua files (a variant of the composed
// check.lua, to see what a change would save), replayed in alternation with the real script on
// the same calls. Linux and wrk only.
//
//   BENCH_SCRIPT_PASSES (9)  BENCH_CONNECTIONS (64)
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { CHECK_SCRIPT } from "../dist/limits/stores/redis/scripts.js";
import { hasWrk, killAll, median, startBenchGateway, startRedis, startUpstream, wrk } from "./support.mjs";

const PASSES = Number(process.env.BENCH_SCRIPT_PASSES ?? 9);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const VARIANTS = (process.env.BENCH_SCRIPT_FILES ?? "").split(",").filter(Boolean);

if (!hasWrk) {
  console.error("bench:script needs wrk on PATH (apt-get install wrk)");
  process.exit(2);
}

/** The check.lua calls a gateway sends under load: [numkeys, ...keys, ...argv] each. */
async function captureCalls() {
  const storeUrl = await startRedis();
  const upstream = await startUpstream();
  const gateway = await startBenchGateway({ storeUrl, upstream });
  wrk(gateway.url, 1, CONNECTIONS); // warm-up: the script is loaded, the pools are full
  const client = new Redis(storeUrl);
  const monitor = await client.monitor();
  const calls = [];
  monitor.on("monitor", (_time, args) => {
    if (String(args[0]).toLowerCase() === "evalsha") calls.push(args.slice(2));
  });
  wrk(gateway.url, 1, CONNECTIONS);
  await new Promise((r) => setTimeout(r, 200));
  monitor.disconnect();
  client.disconnect();
  // Replayed later, past every deadline: cleared, so that each call decides and writes.
  for (const call of calls) call[2 + Number(call[0])] = "";
  return calls;
}

async function redisTimes(redis) {
  const stats = await redis.info("commandstats");
  const cpu = await redis.info("cpu");
  return {
    scriptUs: Number(/cmdstat_evalsha:calls=\d+,usec=(\d+)/.exec(stats)?.[1] ?? 0),
    cpuUs:
      (Number(/used_cpu_user:([\d.]+)/.exec(cpu)[1]) + Number(/used_cpu_sys:([\d.]+)/.exec(cpu)[1])) * 1e6,
  };
}

try {
  const calls = await captureCalls();
  if (calls.length === 0) throw new Error("MONITOR saw no check.lua call");
  const requests = calls.reduce((n, call) => n + Number(call[1 + Number(call[0])]), 0);
  const redis = new Redis(await startRedis());
  const scripts = [
    { name: "check.lua", text: CHECK_SCRIPT },
    ...VARIANTS.map((file) => ({ name: file, text: readFileSync(file, "utf8") })),
  ];
  for (const s of scripts) {
    s.sha = await redis.script("LOAD", s.text);
    s.script = [];
    s.cpu = [];
    for (const call of calls) await redis.evalsha(s.sha, ...call); // every key exists, as under load
  }
  for (let pass = 0; pass < PASSES; pass++) {
    for (const s of scripts) {
      await redis.config("RESETSTAT");
      const before = await redisTimes(redis);
      await Promise.all(calls.map((call) => redis.evalsha(s.sha, ...call)));
      const after = await redisTimes(redis);
      s.script.push(after.scriptUs / requests);
      s.cpu.push((after.cpuUs - before.cpuUs) / requests);
    }
  }
  console.log(
    `${calls.length} check.lua calls captured under load, ${requests} requests (${(requests / calls.length).toFixed(1)} per call), replayed ${PASSES} times`,
  );
  for (const s of scripts) {
    const vsFirst = median(s.script.map((v, i) => v / scripts[0].script[i]));
    console.log(
      `  ${s.name.padEnd(40)} script ${median(s.script).toFixed(2)} µs/req  Redis CPU ${median(s.cpu).toFixed(2)} µs/req${s === scripts[0] ? "" : `  ${vsFirst.toFixed(2)}× check.lua`}`,
    );
  }
  await commandCosts(redis);
  redis.disconnect();
} finally {
  killAll();
}

/**
 * µs per key of each command a script issues, from scripts that issue it for each of 34 existing
 * keys, less a script that only returns: median of 5 × 1,000 calls on the idle Redis.
 */
async function commandCosts(redis) {
  const keys = Array.from({ length: 34 }, (_, i) => `cost{bench}:${i}`);
  for (const k of keys) await redis.set(k, "1764612345678.123", "PX", 600_000);
  const loops = (body) => `for i = 1, #KEYS do ${body} end return 1`;
  const probes = [
    ["an EVALSHA that only returns (per call)", "return 1"],
    ["MGET, per key", "redis.call('MGET', unpack(KEYS)) return 1"],
    ["GET", loops("redis.call('GET', KEYS[i])")],
    ["SET … KEEPTTL", loops("redis.call('SET', KEYS[i], '1764612345678.123', 'KEEPTTL')")],
    ["SET … PX", loops("redis.call('SET', KEYS[i], '1764612345678.123', 'PX', 600000)")],
    ["string.format('%.17g')", loops("local s = string.format('%.17g', 1764612345678.123 + i)")],
  ];
  const perCall = [];
  for (const [, lua] of probes) {
    const sha = await redis.script("LOAD", lua);
    for (let i = 0; i < 200; i++) await redis.evalsha(sha, keys.length, ...keys);
    const samples = [];
    for (let pass = 0; pass < 5; pass++) {
      await redis.config("RESETSTAT");
      await Promise.all(Array.from({ length: 1000 }, () => redis.evalsha(sha, keys.length, ...keys)));
      const stats = await redis.info("commandstats");
      samples.push(Number(/cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(stats)[1]));
    }
    perCall.push(median(samples));
  }
  console.log(`\nwhat a script pays Redis per key it touches (${keys.length} keys a call, idle Redis):`);
  probes.forEach(([name], i) => {
    const us = i === 0 ? perCall[0] : (perCall[i] - perCall[0]) / keys.length;
    console.log(`  ${name.padEnd(42)} ${us.toFixed(2)} µs`);
  });
}
