// Real redis-server processes for tests, on free ports, with nothing persisted. Tests that
// inject faults kill, pause or restart them.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "./ports.js";

export interface RedisProcess {
  port: number;
  url: string;
  client: Redis;
  /** SIGKILL the server (a crash). */
  kill(): Promise<void>;
  /** Start it again on the same port. */
  restart(): Promise<void>;
  /** SIGSTOP: the server holds its connections but answers nothing (a hung Redis). */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
  stop(): Promise<void>;
}

/**
 * A loopback redis-server on `port` that persists nothing; `extra` adds settings. Its own empty
 * dir: a replica's full sync writes dump.rdb there even with `save ""`, and a server started in
 * a dir holding one loads it, so a shared dir would carry one test's keys into the next.
 */
export function redisArgs(port: number, extra: string[] = []): string[] {
  return [
    "--dir",
    mkdtempSync(join(tmpdir(), "tollgate-redis-")),
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--protected-mode",
    "no",
    // A replica's first sync starts at once, not after the 5 s Redis waits by default for more
    // replicas to share a diskless transfer (5 s of every test that starts a replica).
    "--repl-diskless-sync-delay",
    "0",
    ...extra,
  ];
}

async function spawnRedis(port: number): Promise<ChildProcess> {
  const child = spawn("redis-server", redisArgs(port), { stdio: "ignore" });
  await waitForPing(port, child);
  return child;
}

/** Resolves once a redis-server (or sentinel) on `port` answers PING; throws if it exits first. */
export async function waitForPing(
  port: number,
  child: ChildProcess,
  answers: (probe: Redis) => Promise<boolean> = async () => true,
  host = "127.0.0.1",
): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const probe = new Redis({
      port,
      host,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.ping();
      const ok = await answers(probe);
      probe.disconnect();
      if (ok) return;
    } catch {
      probe.disconnect();
    }
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`redis on port ${port} did not start`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startRedis(): Promise<RedisProcess> {
  const port = await freePort();
  let child = await spawnRedis(port);
  const client = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1 });
  client.on("error", () => {});
  const killChild = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, "exit");
    child.kill(signal);
    await exited;
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    client,
    kill: () => killChild("SIGKILL"),
    async restart() {
      child = await spawnRedis(port);
    },
    pause: () => void child.kill("SIGSTOP"),
    resume: () => void child.kill("SIGCONT"),
    async stop() {
      client.disconnect();
      await killChild("SIGKILL");
    },
  };
}
