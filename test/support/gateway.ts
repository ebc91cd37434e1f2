// Gateways for tests: in-process (integration) or as the built CLI in a child process (e2e).
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Writable } from "node:stream";
import { Gateway, type GatewayOptions } from "../../src/gateway/gateway.js";
import { createLogger } from "../../src/observability/log.js";
import { send } from "./http.js";
import { type RedisProcess, startRedis } from "./redis.js";
import { startUpstream, type TestUpstream } from "./upstream.js";

export const CLI = new URL("../../dist/cli.js", import.meta.url).pathname;

export function writeConfig(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), "tollgate-test-"));
  const file = join(dir, "gateway.yaml");
  writeFileSync(file, yaml);
  return file;
}

/** Log lines the gateway wrote, parsed. */
export class LogSink extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) this.lines.push(JSON.parse(line));
    done();
  }
}

export interface InProcessGateway {
  gateway: Gateway;
  url: string;
  adminUrl: string;
  logs: LogSink;
  /** The YAML file it runs; write it and POST /admin/reload to change its config. */
  configFile: string;
  stop(): Promise<void>;
}

export async function startGateway(
  yaml: string,
  env: Record<string, string> = {},
  serverOptions?: GatewayOptions["serverOptions"],
): Promise<InProcessGateway> {
  const logs = new LogSink();
  const configFile = writeConfig(yaml);
  const gateway = await Gateway.start({
    configFile,
    env: { ...process.env, ...env },
    logger: createLogger("info", logs),
    serverOptions,
  });
  return {
    gateway,
    url: `http://127.0.0.1:${gateway.proxyAddress!.port}`,
    adminUrl: `http://127.0.0.1:${gateway.adminAddress!.port}`,
    logs,
    configFile,
    stop: async () => {
      await gateway.stop(1000);
    },
  };
}

export interface GatewayProcess {
  child: ChildProcess;
  /** The YAML file it runs: write it and reload to change its config. */
  configFile: string;
  url: string;
  adminUrl: string;
  lines: Record<string, unknown>[];
  stderr: string[];
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Runs `node dist/cli.js --config FILE` and waits for its "tollgate listening" line. `prefix`
 * runs it through a command that execs it (`ip netns exec NAME`): the child is still the node.
 */
export async function spawnGateway(
  yaml: string,
  env: Record<string, string> = {},
  prefix: string[] = [],
): Promise<GatewayProcess> {
  const configFile = writeConfig(yaml);
  const argv = [...prefix, process.execPath, CLI, "--config", configFile];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Record<string, unknown>[] = [];
  const stderr: string[] = [];
  child.stderr!.on("data", (d: Buffer) => stderr.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  let startTimer: NodeJS.Timeout | undefined;
  const listening = new Promise<Record<string, unknown>>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(line);
      } catch {
        return;
      }
      lines.push(parsed);
      if (parsed.msg === "tollgate listening") resolve(parsed);
    });
    void exited.then((code) => reject(new Error(`gateway exited with ${code}: ${stderr.join("")}`)));
    startTimer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(
          `gateway did not log "tollgate listening" within 15 s (is log.level above info?): ${stderr.join("")}`,
        ),
      );
    }, 15_000);
    startTimer.unref();
  });
  // Cleared once it listens: left running, it would kill a gateway that lives longer than 15 s.
  const ready = await listening.finally(() => clearTimeout(startTimer));
  return {
    child,
    configFile,
    url: String(ready.proxy),
    adminUrl: String(ready.admin),
    lines,
    stderr,
    exited,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}

export interface SharedRedisSetup {
  redis: RedisProcess;
  upstream: TestUpstream;
  /** Two gateway processes on the same config, sharing the Redis. */
  a: GatewayProcess;
  b: GatewayProcess;
  stop(): Promise<void>;
}

/** A real Redis, a real upstream and two gateway CLI processes sharing them. */
export async function startTwoInstances(
  config: (redisUrl: string, upstreamUrl: string) => string,
): Promise<SharedRedisSetup> {
  const redis = await startRedis();
  const upstream = await startUpstream();
  const yaml = config(redis.url, upstream.url);
  const [a, b] = await Promise.all([spawnGateway(yaml), spawnGateway(yaml)]);
  return {
    redis,
    upstream,
    a,
    b,
    async stop() {
      await Promise.all([a.stop(), b.stop()]);
      await upstream.close();
      await redis.stop();
    },
  };
}

/** The first capture of `pattern` in a gateway's /metrics, as a number (NaN when absent). */
export async function metricValue(adminUrl: string, pattern: RegExp): Promise<number> {
  const m = pattern.exec((await send(adminUrl, { path: "/metrics" })).body);
  return m ? Number(m[1]) : Number.NaN;
}
