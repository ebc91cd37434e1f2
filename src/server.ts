// Builds the runtime, starts the proxy and admin listeners, and stops them gracefully. This is
// the only place that picks a store implementation.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { Metrics } from "./admin/metrics.js";
import { createAdminHandler } from "./admin/server.js";
import { compileRuntime, type Runtime } from "./config/compile.js";
import { loadConfigFile } from "./config/load.js";
import { ConfigError } from "./config/problems.js";
import { Limiter } from "./limits/limiter.js";
import type { Store } from "./limits/store.js";
import { MemoryStore } from "./limits/stores/memory.js";
import { RedisStore } from "./limits/stores/redis.js";
import { createLogger } from "./log.js";
import { createPipeline } from "./proxy/pipeline.js";
import { UpstreamPools } from "./proxy/upstreams.js";

export interface GatewayOptions {
  configFile: string;
  env?: Readonly<Record<string, string | undefined>>;
  logger?: Logger;
}

export function createStore(rt: Runtime, logger: Logger): Store {
  if (rt.store.url.startsWith("memory://")) return new MemoryStore();
  let lastLogged = 0;
  return new RedisStore({
    url: rt.store.url,
    timeoutMs: rt.store.timeoutMs,
    onError: (err) => {
      // A down Redis errors on every reconnect attempt; once every 5 s is enough to notice.
      const now = Date.now();
      if (now - lastLogged < 5000) return;
      lastLogged = now;
      logger.warn(
        { err: { message: err.message, code: (err as NodeJS.ErrnoException).code } },
        "limit store error",
      );
    },
  });
}

function splitHostPort(listen: string): { host: string; port: number } {
  const colon = listen.lastIndexOf(":");
  const host = listen.slice(0, colon).replace(/^\[|\]$/g, "");
  return { host: host || "0.0.0.0", port: Number(listen.slice(colon + 1)) };
}

function listen(server: Server, address: string): Promise<AddressInfo> {
  const { host, port } = splitHostPort(address);
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

export function urlOf(a: AddressInfo): string {
  const host = a.family === "IPv6" ? `[${a.address}]` : a.address;
  return `http://${host}:${a.port}`;
}

/** How long start-up waits for the store before serving with the failure policy. */
const STARTUP_STORE_WAIT_MS = 1000;

export class Gateway {
  readonly logger: Logger;
  readonly metrics = new Metrics();
  private runtime: Runtime;
  private store: Store;
  private limiter: Limiter;
  private readonly pools = new UpstreamPools();
  private readonly inFlight = { count: 0 };
  private proxyServer: Server | undefined;
  private adminServer: Server | undefined;
  proxyAddress: AddressInfo | undefined;
  adminAddress: AddressInfo | undefined;

  private constructor(runtime: Runtime, logger: Logger) {
    this.runtime = runtime;
    this.logger = logger;
    this.store = createStore(runtime, logger);
    this.limiter = new Limiter(this.store, runtime.store.prefix);
  }

  /** Loads the config (throwing ConfigError with every problem) and starts both listeners. */
  static async start(options: GatewayOptions): Promise<Gateway> {
    const loaded = await loadConfigFile(options.configFile, options.env ?? process.env);
    if (!loaded.ok) throw new ConfigError(loaded.problems);
    const runtime = compileRuntime(loaded.config, { file: loaded.file, version: loaded.version });
    const logger = options.logger ?? createLogger(loaded.config.log.level);
    const gateway = new Gateway(runtime, logger);
    if (!(await gateway.store.waitUntilReady(STARTUP_STORE_WAIT_MS))) {
      logger.warn(
        { store: runtime.store.url.replace(/\/\/[^@/]*@/, "//***@") },
        "limit store not reachable at start; serving with the failure policy until it is",
      );
    }
    await gateway.listen();
    return gateway;
  }

  get currentRuntime(): Runtime {
    return this.runtime;
  }

  get currentStore(): Store {
    return this.store;
  }

  private async listen(): Promise<void> {
    const pipeline = createPipeline({
      runtime: () => this.runtime,
      limiter: () => this.limiter,
      pools: this.pools,
      metrics: this.metrics,
      logger: this.logger,
      inFlight: this.inFlight,
    });
    this.proxyServer = createServer({ keepAliveTimeout: 5000 }, pipeline);
    const admin = createAdminHandler({
      runtime: () => this.runtime,
      store: () => this.store,
      metrics: this.metrics,
    });
    this.adminServer = createServer((req, res) => void admin(req, res));
    try {
      this.proxyAddress = await listen(this.proxyServer, this.runtime.config.listen);
      this.adminAddress = await listen(this.adminServer, this.runtime.config.admin.listen);
    } catch (err) {
      this.proxyServer.close();
      this.adminServer.close();
      await this.store.close();
      throw err;
    }
    this.logger.info(
      {
        proxy: urlOf(this.proxyAddress),
        admin: urlOf(this.adminAddress),
        store: this.store.kind,
        config: this.runtime.file,
        config_version: this.runtime.version,
        routes: this.runtime.routeList.length,
      },
      "tollgate listening",
    );
  }

  /**
   * Stops accepting, lets requests in flight finish for up to `graceMs`, then closes everything.
   * Resolves with the number of requests that had to be cut.
   */
  async stop(graceMs = this.runtime.config.shutdown_grace): Promise<number> {
    const proxy = this.proxyServer;
    const admin = this.adminServer;
    proxy?.close();
    admin?.close();
    proxy?.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    while (this.inFlight.count > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      // Keep-alive connections that finished a response become idle: close them as they do.
      proxy?.closeIdleConnections();
    }
    const cut = this.inFlight.count;
    if (cut > 0) {
      this.logger.warn(
        { in_flight: cut },
        "shutdown grace ran out; closing connections with requests in flight",
      );
      proxy?.closeAllConnections();
      await this.pools.destroy();
    } else {
      await this.pools.close();
    }
    admin?.closeAllConnections();
    await this.store.close();
    this.logger.info({ cut }, "tollgate stopped");
    return cut;
  }
}
