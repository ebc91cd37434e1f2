// A Redis master watched by one Redis Sentinel, for testing store.sentinel.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "./ports.js";
import { type RedisProcess, startRedis, waitForPing } from "./redis.js";

async function until(test: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error("the replica never synced with the master");
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface SentinelProcess {
  master: RedisProcess;
  /** With `{ replicas: n }`: the master's replicas, in sync, known to the sentinel. */
  replicas: RedisProcess[];
  /** The sentinel, to ask or to command (SENTINEL FAILOVER). */
  client: Redis;
  name: string;
  /** host:port of the sentinel, as store.sentinel.nodes takes it. */
  node: string;
  stop(): Promise<void>;
}

export async function startSentinel({
  replicas: count = 0,
  downAfterMs = 30_000,
} = {}): Promise<SentinelProcess> {
  const master = await startRedis();
  const replicas: RedisProcess[] = [];
  for (let i = 0; i < count; i++) {
    const replica = await startRedis();
    replicas.push(replica);
    await replica.client.replicaof("127.0.0.1", master.port);
    await until(async () => /master_link_status:up/.test(await replica.client.info("replication")));
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "tollgate-sentinel-"));
  const conf = join(dir, "sentinel.conf");
  writeFileSync(
    conf,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      "protected-mode no",
      `dir ${dir}`,
      `sentinel monitor mymaster 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds mymaster ${downAfterMs}`,
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn("redis-server", [conf, "--sentinel"], { stdio: "ignore" });
  // Ready once the sentinel names the master.
  await waitForPing(port, child, async (probe) => {
    const addr = (await probe.call("SENTINEL", "get-master-addr-by-name", "mymaster")) as string[] | null;
    if (addr === null || Number(addr[1]) !== master.port) return false;
    // The sentinel learns of a replica from the master's INFO, which it asks at once.
    return ((await probe.call("SENTINEL", "replicas", "mymaster")) as unknown[]).length === count;
  });
  const client = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1 });
  client.on("error", () => {});
  return {
    master,
    replicas,
    client,
    name: "mymaster",
    node: `127.0.0.1:${port}`,
    async stop() {
      client.disconnect();
      for (const replica of replicas) await replica.stop();
      if (child.exitCode === null) {
        const exited = once(child, "exit");
        child.kill("SIGKILL");
        await exited;
      }
      await master.stop();
    },
  };
}
