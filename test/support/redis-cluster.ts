// A real 3-master Redis Cluster for tests: three redis-server processes in cluster mode on free
// ports, joined with `redis-cli --cluster create`. A master can be killed to test a lost shard;
// the nodes keep serving their own slots then (cluster-require-full-coverage no).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Cluster } from "ioredis";
import { freePort } from "./ports.js";
import { redisArgs, waitForPing } from "./redis.js";

const run = promisify(execFile);

export interface RedisClusterProcess {
  ports: number[];
  /** The seed URLs for store.cluster. */
  urls: string[];
  client: Cluster;
  /** The port of the master serving a key. */
  portOf(key: string): Promise<number>;
  /** SIGKILL the master on `port` (a lost shard). */
  kill(port: number): Promise<void>;
  /** Start a killed node again, empty, with its nodes.conf: it rejoins the cluster. */
  restart(port: number): Promise<void>;
  /** With replicas: the port of the node replicating the master on `port`, from CLUSTER NODES. */
  replicaOf(port: number): Promise<number | undefined>;
  stop(): Promise<void>;
}

/**
 * Three masters on free ports; with `replicas: 1`, three more nodes, one replicating each
 * (`ports` still lists the masters first, then the replicas, as `redis-cli --cluster create`
 * assigns them).
 */
export async function startRedisCluster({
  replicas = 0,
}: {
  replicas?: 0 | 1;
} = {}): Promise<RedisClusterProcess> {
  const dir = mkdtempSync(join(tmpdir(), "tollgate-cluster-"));
  const ports: number[] = [];
  for (let i = 0; i < 3 * (1 + replicas); i++) ports.push(await freePort());
  const children = new Map<number, ChildProcess>();
  const spawnNode = (port: number) =>
    spawn(
      "redis-server",
      redisArgs(port, [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        join(dir, `nodes-${port}.conf`),
        "--cluster-node-timeout",
        "1000",
        "--cluster-require-full-coverage",
        "no",
        "--dir",
        dir,
      ]),
      { stdio: "ignore" },
    );
  for (const port of ports) children.set(port, spawnNode(port));
  // A setup that fails (a node that cannot bind its port, a cluster that never agrees) kills the
  // nodes it started: they would outlive the test run otherwise.
  const client = new Cluster(
    ports.map((port) => ({ host: "127.0.0.1", port })),
    {
      redisOptions: { maxRetriesPerRequest: 1 },
      lazyConnect: true,
    },
  );
  client.on("error", () => {});
  try {
    await formCluster(ports, children, replicas);
    await client.ping();
  } catch (err) {
    client.disconnect();
    for (const child of children.values()) child.kill("SIGKILL");
    throw err;
  }
  const kill = async (port: number) => {
    const child = children.get(port);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, "exit");
    child.kill("SIGKILL");
    await exited;
  };
  return {
    ports,
    urls: ports.map((p) => `redis://127.0.0.1:${p}`),
    client,
    async portOf(key) {
      const slot = Number(await client.cluster("KEYSLOT", key));
      const slots = (await client.cluster("SLOTS")) as unknown as [number, number, [string, number]][];
      const range = slots.find(([from, to]) => slot >= from && slot <= to)!;
      return range[2][1];
    },
    kill,
    async restart(port) {
      const child = spawnNode(port);
      children.set(port, child);
      await waitForPing(port, child);
    },
    async replicaOf(port) {
      const alive = ports.find(
        (p) => p !== port && children.get(p)?.exitCode === null && children.get(p)?.signalCode === null,
      )!;
      const { stdout } = await run("redis-cli", ["-p", String(alive), "cluster", "nodes"]);
      const lines = stdout
        .trim()
        .split("\n")
        .map((l) => l.split(" "));
      const master = lines.find((f) => f[1]?.startsWith(`127.0.0.1:${port}@`));
      const replica = master && lines.find((f) => f[3] === master[0] && f[2]?.includes("slave"));
      return replica ? Number(replica[1]!.split(":")[1]!.split("@")[0]) : undefined;
    },
    async stop() {
      client.disconnect();
      for (const port of ports) await kill(port);
    },
  };
}

/** Waits for every node, joins them into a cluster and waits until every node says it is ok. */
async function formCluster(
  ports: number[],
  children: Map<number, ChildProcess>,
  replicas: number,
): Promise<void> {
  for (const port of ports) await waitForPing(port, children.get(port)!);
  await run("redis-cli", [
    "--cluster",
    "create",
    ...ports.map((p) => `127.0.0.1:${p}`),
    "--cluster-replicas",
    String(replicas),
    "--cluster-yes",
  ]);
  // Every node must agree the cluster is up before tests use it.
  const deadline = Date.now() + 15_000;
  for (const port of ports) {
    for (;;) {
      const { stdout } = await run("redis-cli", ["-p", String(port), "cluster", "info"]);
      if (stdout.includes("cluster_state:ok")) break;
      if (Date.now() > deadline) throw new Error(`cluster did not become ok on ${port}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
