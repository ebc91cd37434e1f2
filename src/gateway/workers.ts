// `workers: N | auto`: N processes serve the proxy listener together (node:cluster shares the
// socket), so the gateway uses every core. The primary owns what must exist once: the admin
// listener (its /metrics sums every worker's), the config watch, and the workers' lives: it
// tells them to reload, drains them on SIGTERM, and replaces one that crashes.
import cluster, { type Worker } from "node:cluster";
import { availableParallelism } from "node:os";
import { AggregatorRegistry } from "prom-client";
import { ConfigError, formatProblem } from "../config/problems.js";
import { Gateway } from "./gateway.js";
import { targetsOf, urlOf } from "./listeners.js";

const RELOAD = "tollgate:reload";

/** A gateway that cannot start: its config problems (exit 2) or why (exit 1). */
export function exitOnStartError(err: unknown): never {
  if (err instanceof ConfigError) {
    for (const p of err.problems) process.stderr.write(`${formatProblem(p)}\n`);
    process.exit(2);
  }
  process.stderr.write(`tollgate: cannot start: ${(err as Error).message}\n`);
  process.exit(1);
}

export function workerCount(setting: number | "auto"): number {
  return setting === "auto" ? Math.max(1, availableParallelism()) : setting;
}

/** In a worker: the proxy listener only; reloads come from the primary. */
export async function runWorker(file: string): Promise<void> {
  const gateway = await Gateway.start({ configFile: file, role: "worker" });
  // prom-client answers the primary's metric requests only once an AggregatorRegistry exists in
  // the worker too (its constructor installs the listener); it reports these registries.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([gateway.metrics.registry]);
  process.on("message", (message) => {
    if (message === RELOAD) void gateway.reload("signal");
  });
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    gateway.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // The primary going away takes its workers with it.
  process.on("disconnect", stop);
}

/** In the primary: fork `count` workers, then the admin listener; wire signals. */
export async function runPrimary(file: string, count: number): Promise<void> {
  const aggregator = new AggregatorRegistry();
  let gateway: Gateway;
  try {
    gateway = await Gateway.start({
      configFile: file,
      role: "primary",
      metricsText: async () => ({
        text: await aggregator.clusterMetrics(),
        contentType: aggregator.contentType,
      }),
      onReload: () => {
        for (const worker of Object.values(cluster.workers ?? {})) worker?.send(RELOAD);
      },
    });
  } catch (err) {
    exitOnStartError(err);
  }
  const logger = gateway.logger;
  let stopping = false;

  const fork = (): Worker => cluster.fork({ TOLLGATE_WORKER: "1" });
  // Each worker serves TLS itself (listen.tls), with the certificate it loaded and reloads.
  const tls = gateway.currentRuntime.listen.tls;
  const listening = new Promise<string>((resolve) => {
    let ready = 0;
    cluster.on("listening", (_worker, address) => {
      ready++;
      if (ready === count)
        resolve(
          urlOf(
            {
              address: address.address ?? "127.0.0.1",
              family: address.addressType === 6 ? "IPv6" : "IPv4",
              port: address.port,
            },
            tls !== undefined,
          ),
        );
    });
  });
  cluster.on("exit", (worker, code, signal) => {
    if (stopping) return;
    logger.error({ worker: worker.process.pid, code, signal }, "worker exited; starting a replacement");
    fork();
  });
  for (let i = 0; i < count; i++) fork();
  const proxy = await listening;
  logger.info(
    {
      proxy,
      admin: `http://${gateway.adminAddress!.address}:${gateway.adminAddress!.port}`,
      // The rate-limit service is the primary's own (rls): the workers serve the proxy only.
      ...(gateway.rlsAddress !== undefined ? { rls: gateway.rlsAddress } : {}),
      workers: count,
      ...(tls
        ? { tls: { cert_file: tls.certFile, fingerprint: tls.fingerprint, not_after: tls.notAfter } }
        : {}),
      store: gateway.currentStore.kind,
      ...targetsOf(gateway.currentRuntime),
    },
    "tollgate listening",
  );

  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, workers: count }, "stopping: workers finish their requests in flight");
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
    const exited = workers.map((w) => new Promise<void>((resolve) => w.once("exit", () => resolve())));
    for (const w of workers) w.process.kill("SIGTERM");
    Promise.all(exited)
      .then(() => gateway.stop())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGHUP", () => void gateway.reload("signal"));
}

export const isWorker = cluster.isWorker;
