// A Redis Cluster failover behind two gateways, one without and one with store.replicas.wait:
// three masters with a replica each (cluster-node-timeout 1000), callers whose keys live on one
// master, that master SIGKILLed with its replica in sync. The replica is promoted by the cluster
// itself; each gateway must decide from it again (a new master: a closed breaker of its own),
// no caller may get past its 50, and the old master, restarted empty, rejoins as a replica.
// With wait: 1 the promoted master has no replica until the old one rejoins, so its admissions
// follow on_failure until then: the old master is restarted at once, as an operator would.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ask, askMany, sleep, until } from "../support/decided-by.js";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const run = promisify(execFile);
const LIMIT = 50;

let cluster: RedisClusterProcess;
let upstream: TestUpstream;
const gateways = new Map<"default" | "wait", GatewayProcess>();
/** Callers (and a probe) whose keys are all on the victim master. */
let callers: string[] = [];
let probe = "";
let victim = 0;

const config = (seeds: string[], mode: "default" | "wait", ids: string[], probeId: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store:
  cluster: [${seeds.join(", ")}]
  prefix: "${mode}:"
  timeout: 200ms
  on_failure: open
${mode === "wait" ? "  replicas: { wait: 1, timeout: 50ms }\n" : ""}upstreams: { api: ${upstream.url} }
clients:
${ids.map((id) => `  - { id: ${id}, key: key-${id}, plan: metered }`).join("\n")}
  - { id: ${probeId}, key: key-${probeId}, plan: roomy }
plans:
  metered: { global: { rate: 1/h, burst: ${LIMIT} } }
  roomy: { global: { rate: 100000/s, burst: 100000 } }
routes: [{ name: default, match: { path: / }, upstream: api }]
`;

beforeAll(async () => {
  cluster = await startRedisCluster({ replicas: 1 });
  upstream = await startUpstream();
  // A caller's keys share its slot ({c:<id>}): pick three ids on one master, the victim.
  const ids = Array.from({ length: 60 }, (_, i) => `c${i}`);
  const ports = await Promise.all(ids.map((id) => cluster.portOf(`{c:${id}}`)));
  victim = ports[0]!;
  const onVictim = ids.filter((_, i) => ports[i] === victim);
  callers = onVictim.slice(0, 2);
  probe = onVictim[2]!;
  expect(await cluster.replicaOf(victim)).toBeDefined();
  for (const mode of ["default", "wait"] as const)
    gateways.set(mode, await spawnGateway(config(cluster.urls, mode, callers, probe)));
}, 60_000);

afterAll(async () => {
  for (const g of gateways.values()) await g.stop("SIGKILL");
  await upstream?.close();
  await cluster?.stop();
});

describe("a Cluster shard's master killed, its replica in sync", () => {
  const figures: Record<string, unknown> = {};

  it("the replica takes over; every gateway decides from it within a second, and no caller gets past its limit", async () => {
    // Each gateway connected to every master before the count starts.
    for (const g of gateways.values())
      await until(
        "the gateway deciding from the store",
        async () => (await ask(g.url, `key-${probe}`)) === "store-200",
        10_000,
      );
    for (const g of gateways.values())
      for (const c of callers) expect(await askMany(g.url, `key-${c}`, 30)).toEqual({ "store-200": 30 });
    const master = new Redis({ port: victim, host: "127.0.0.1", maxRetriesPerRequest: 0 });
    master.on("error", () => {});
    expect(Number(await master.call("WAIT", "1", "2000"))).toBe(1);
    master.disconnect();
    const replica = (await cluster.replicaOf(victim))!;
    const promoted = new Redis({ port: replica, host: "127.0.0.1" });
    promoted.on("error", () => {});

    const killedAt = Date.now();
    await cluster.kill(victim);
    // Probes on every gateway from the kill on: a 200 without X-RateLimit-Degraded is a decision
    // of the store, on the probe's slot, the victim's.
    const firstStoreAnswer = new Map<string, number>();
    let probing = true;
    const probes = [...gateways].map(async ([mode, g]) => {
      while (probing && !firstStoreAnswer.has(mode)) {
        if ((await ask(g.url, `key-${probe}`)) === "store-200") firstStoreAnswer.set(mode, Date.now());
        else await sleep(20);
      }
    });
    await until(
      "the replica to be promoted",
      async () => /role:master/.test(await promoted.info("replication")),
      20_000,
    );
    const promotedAt = Date.now();
    // wait: 1 needs a replica of the new master: the old one, back empty, is made one.
    await cluster.restart(victim);
    await until("every gateway deciding from the store", async () => firstStoreAnswer.size === 2, 30_000)
      .catch(async (err) => {
        const stuck = [...gateways].filter(([mode]) => !firstStoreAnswer.has(mode));
        for (const [, g] of stuck) {
          const m = await (await fetch(`${g.adminUrl}/metrics`)).text();
          console.log(
            "METRICS",
            m
              .split("\n")
              .filter((l) => /store_errors|breaker/.test(l))
              .join("\n"),
          );
          console.log(
            "NODES",
            (
              await run("redis-cli", [
                "-p",
                String((await cluster.replicaOf(victim)) ?? victim),
                "cluster",
                "nodes",
              ])
            ).stdout,
          );
        }
        throw new Error(
          `${err.message}: ${stuck.map(([mode, g]) => `${mode}: ${JSON.stringify(g.lines.slice(-4))}`).join("; ")}`,
        );
      })
      .finally(() => {
        probing = false;
      });
    await Promise.all(probes);
    const recoveryMs = Object.fromEntries([...firstStoreAnswer].map(([mode, at]) => [mode, at - promotedAt]));
    const after: Record<string, Record<string, number>[]> = {};
    for (const [mode, g] of gateways)
      after[mode] = await Promise.all(callers.map((c) => askMany(g.url, `key-${c}`, 30)));
    Object.assign(figures, { electionMs: promotedAt - killedAt, recoveryMs, after });
    console.log(`cluster failover: ${JSON.stringify(figures)}`);
    // Not one admission lost with the replica in sync: each caller had 20 left, and gets 20.
    for (const mode of ["default", "wait"])
      for (const tally of after[mode]!) expect(tally, mode).toEqual({ "store-200": 20, "store-429": 10 });
    // The default gateway is back within a second of the promotion; the waiting one once the
    // new master has a replica again (the old master rejoining, a full sync).
    expect(recoveryMs.default).toBeLessThan(1000);
    promoted.disconnect();
  }, 90_000);

  it("the old master rejoins as a replica of the promoted one", async () => {
    const old = new Redis({ port: victim, host: "127.0.0.1" });
    old.on("error", () => {});
    await until(
      "the old master to replicate",
      async () => /role:slave[\s\S]*master_link_status:up/.test(await old.info("replication")),
      20_000,
    );
    const { stdout } = await run("redis-cli", ["-p", String(victim), "cluster", "nodes"]);
    expect(stdout).toMatch(new RegExp(`127\\.0\\.0\\.1:${victim}@\\d+ myself,slave `));
    old.disconnect();
  }, 30_000);
});
