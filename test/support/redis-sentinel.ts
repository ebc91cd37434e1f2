// A Redis master watched by one Redis Sentinel, for testing store.sentinel.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.js";
import { type RedisProcess, startRedis, waitForPing } from "./redis.js";

export interface SentinelProcess {
  master: RedisProcess;
  name: string;
  /** host:port of the sentinel, as store.sentinel.nodes takes it. */
  node: string;
  stop(): Promise<void>;
}

export async function startSentinel(): Promise<SentinelProcess> {
  const master = await startRedis();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "tollgate-sentinel-"));
  const conf = join(dir, "sentinel.conf");
  writeFileSync(
    conf,
    `port ${port}\nbind 127.0.0.1\nprotected-mode no\ndir ${dir}\nsentinel monitor mymaster 127.0.0.1 ${master.port} 1\n`,
  );
  const child: ChildProcess = spawn("redis-server", [conf, "--sentinel"], { stdio: "ignore" });
  // Ready once the sentinel names the master.
  await waitForPing(port, child, async (probe) => {
    const addr = (await probe.call("SENTINEL", "get-master-addr-by-name", "mymaster")) as string[] | null;
    return addr !== null && Number(addr[1]) === master.port;
  });
  return {
    master,
    name: "mymaster",
    node: `127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode === null) {
        const exited = once(child, "exit");
        child.kill("SIGKILL");
        await exited;
      }
      await master.stop();
    },
  };
}
