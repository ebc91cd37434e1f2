// Builds the runtime, starts the proxy and admin listeners, and stops them gracefully. This is
// the only place that picks a store implementation.
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Logger } from "pino";
import { createAdminHandler } from "../admin/server.js";
import { compileRuntime, type Runtime } from "../config/compile.js";
import { loadConfigFile, loadConfigFileOffThread } from "../config/load.js";
import { ConfigError, type ConfigProblem, formatProblem } from "../config/problems.js";
import { splitRestartOnly } from "../config/restart.js";
import { ConfigWatcher } from "../config/watch.js";
import { answerClientError } from "../http/client-error.js";
import { AuthFailureThrottle } from "../identity/auth-failures.js";
import { BreakerStore } from "../limits/breaker.js";
import { createGatewayLimiter } from "../limits/gateway-limiter.js";
import type { Limiter } from "../limits/limiter.js";
import type { Store } from "../limits/stores/contract.js";
import { MemoryStore } from "../limits/stores/memory.js";
import { RedisStore } from "../limits/stores/redis/store.js";
import { createLogger } from "../observability/log.js";
import { Metrics } from "../observability/metrics.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";
import { SustainedDenials } from "../observability/sustained.js";
import type { Generation } from "../proxy/context.js";
import { createPipeline } from "../proxy/pipeline.js";
import { UpstreamPools } from "../proxy/upstreams.js";

export interface GatewayOptions {
  configFile: string;
  env?: Readonly<Record<string, string | undefined>>;
  logger?: Logger;
  /** Reload when the file changes (default true). */
  watch?: boolean;
  /** Overrides of PROXY_SERVER_OPTIONS (tests shorten the timeouts). */
  serverOptions?: Partial<typeof PROXY_SERVER_OPTIONS>;
  /**
   * `all` (one process: both listeners), `worker` (the proxy listener only, shared with the
   * other workers through node:cluster) or `primary` (the admin listener only, with metrics
   * gathered from the workers). See workers.ts.
   */
  role?: "all" | "worker" | "primary";
  /** Called after each reload that changed the config (the primary tells its workers). */
  onReload?: (result: ReloadResult) => void;
  /** The /metrics text; default: this process's registry (the primary aggregates workers). */
  metricsText?: () => Promise<{ text: string; contentType: string }>;
}

/**
 * Limits against slow and oversized clients. Node checks the two timeouts every
 * `connectionsCheckingInterval` (30 s by default, which would let a slowloris client hold a
 * connection for half a minute past them).
 */
export const PROXY_SERVER_OPTIONS: {
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  connectionsCheckingInterval: number;
  maxHeaderSize: number;
  requireHostHeader: boolean;
} = {
  /** The whole header block must arrive within this. */
  headersTimeout: 10_000,
  /** The whole request, body included, must arrive within this. */
  requestTimeout: 120_000,
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeout: 5000,
  connectionsCheckingInterval: 1000,
  /** Larger header blocks are a 431. */
  maxHeaderSize: 16 * 1024,
  // Checked in the pipeline instead, so the 400 is a problem+json like every other.
  requireHostHeader: false,
};

export type ReloadTrigger = "watch" | "signal" | "admin";

export type ReloadResult =
  | { ok: true; version: string; changed: boolean; restartRequired: string[] }
  | { ok: false; problems: ConfigProblem[] };

/** Editors and ConfigMap updates touch a file several times in a burst: wait for quiet. */
const WATCH_DEBOUNCE_MS = 200;

/** Most keys the local fallback (on_failure: local) holds; it only covers outages. */
const LOCAL_FALLBACK_MAX_KEYS = 100_000;

export function createStore(
  rt: Runtime,
  logger: Logger,
  metrics: Metrics,
  errors = new StoreErrors(storeAddress(rt.store)),
): Store {
  if (rt.store.url.startsWith("memory://")) return new MemoryStore();
  let lastLogged = 0;
  const redis = new RedisStore({
    url: rt.store.cluster || rt.store.sentinel ? undefined : rt.store.url,
    cluster: rt.store.cluster,
    sentinel: rt.store.sentinel,
    timeoutMs: rt.store.timeoutMs,
    onError: (err) => {
      errors.connectionFailed(err);
      // A down Redis errors on every reconnect attempt; once every 5 s is enough to notice.
      const now = Date.now();
      if (now - lastLogged < 5000) return;
      lastLogged = now;
      logger.warn(
        {
          problem: errors.describe(err),
          err: { message: err.message, code: (err as NodeJS.ErrnoException).code },
        },
        "limit store error",
      );
    },
  });
  redis.client.on("ready", () => errors.connected());
  const b = rt.config.store.breaker;
  return new BreakerStore(
    redis,
    {
      errorRate: b.error_rate,
      minRequests: b.min_requests,
      windowMs: b.window,
      cooldownMs: b.cooldown,
    },
    ({ shard, state, overall }) => {
      metrics.breakerState.set(overall);
      const label = state === 2 ? "open" : state === 1 ? "half-open" : "closed";
      // A shard is a cluster master's address; a single Redis has one breaker and no shard.
      logger[state === 2 ? "warn" : "info"](
        shard ? { breaker: label, shard } : { breaker: label },
        `limit store breaker ${label}${shard ? ` for shard ${shard}` : ""}`,
      );
    },
  );
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

/**
 * Where this gateway sends things, for its start line: the store's address and each upstream's
 * URL, without the user and password either may carry.
 */
export function targetsOf(rt: Runtime): { store_address: string; upstreams: Record<string, string> } {
  const upstreams: Record<string, string> = {};
  for (const u of rt.upstreams.values()) upstreams[u.name] = u.origin + u.basePath;
  return { store_address: storeAddress(rt.store), upstreams };
}

/** The files a runtime was loaded from: the config, and the JWT key file it names. */
function watchedFiles(rt: Runtime): string[] {
  return rt.keyFile === undefined ? [rt.file] : [rt.file, rt.keyFile];
}

/** How long start-up waits for the store before serving with the failure policy. */
const STARTUP_STORE_WAIT_MS = 1000;

export class Gateway {
  readonly logger: Logger;
  readonly metrics = new Metrics();
  /**
   * The runtime and the limiter built for it, swapped whole by one assignment on reload: a
   * request reads it once and keeps it to its end, so it never sees one half of a reload.
   */
  private generation: Generation<Limiter>;
  private readonly store: Store;
  /** Store failures in an operator's words, with the cause of the last failed connection. */
  private readonly storeErrors: StoreErrors;
  private readonly pools = new UpstreamPools();
  private readonly inFlight = { count: 0 };
  private proxyServer: Server | undefined;
  private adminServer: Server | undefined;
  proxyAddress: AddressInfo | undefined;
  adminAddress: AddressInfo | undefined;
  private readonly env: Readonly<Record<string, string | undefined>>;
  private watcher: ConfigWatcher | undefined;
  private reloading: Promise<ReloadResult> | null = null;
  private onReload: ((result: ReloadResult) => void) | undefined;

  private constructor(runtime: Runtime, logger: Logger, env: Readonly<Record<string, string | undefined>>) {
    this.env = env;
    this.logger = logger;
    // The store's address cannot change without a restart (config/restart.ts).
    this.storeErrors = new StoreErrors(storeAddress(runtime.store));
    this.store = createStore(runtime, logger, this.metrics, this.storeErrors);
    this.generation = Object.freeze({ runtime, limiter: this.newLimiter(runtime) });
  }

  /** Loads the config (throwing ConfigError with every problem) and starts both listeners. */
  static async start(options: GatewayOptions): Promise<Gateway> {
    const loaded = await loadConfigFile(options.configFile, options.env ?? process.env);
    if (!loaded.ok) throw new ConfigError(loaded.problems);
    const runtime = compileRuntime(loaded.config, {
      file: loaded.file,
      version: loaded.version,
      jwt: loaded.jwt,
      keyFile: loaded.keyFile,
    });
    const logger = options.logger ?? createLogger(loaded.config.log.level);
    // Warnings (config/checks.ts) do not stop the gateway; with workers, the primary logs them.
    if (loaded.warnings.length && options.role !== "worker") {
      logger.warn({ warnings: loaded.warnings.map(formatProblem) }, "config loaded with warnings");
    }
    const gateway = new Gateway(runtime, logger, options.env ?? process.env);
    if (!(await gateway.store.waitUntilReady(STARTUP_STORE_WAIT_MS))) {
      logger.warn(
        { store: runtime.store.url.replace(/\/\/[^@/]*@/, "//***@") },
        "limit store not reachable at start; serving with the failure policy until it is",
      );
    }
    gateway.onReload = options.onReload;
    const role = options.role ?? "all";
    await gateway.listen({ ...PROXY_SERVER_OPTIONS, ...options.serverOptions }, role, options.metricsText);
    // Workers reload when their primary says so; only one process watches the file.
    if (options.watch !== false && role !== "worker") gateway.watchConfig();
    return gateway;
  }

  /** The local fallback store outlives reloads: an outage does not restart its counting. */
  private readonly localStore = new MemoryStore({ maxKeys: LOCAL_FALLBACK_MAX_KEYS });

  private newLimiter(rt: Runtime): Limiter {
    return createGatewayLimiter({
      store: this.store,
      prefix: rt.store.prefix,
      // Each limit's local share (store.local_fraction) is compiled into the runtime's plans.
      local: this.localStore,
      // In-process state needs no cache in front of it; a shared store does.
      denyCache: this.store.kind === "redis",
    });
  }

  /**
   * Reads the file again and, if it is valid, swaps in a new runtime. Requests in flight keep
   * the runtime they started with; pools of upstreams that changed are drained. A file that
   * fails is refused with every problem logged, and the previous config keeps serving.
   */
  reload(trigger: ReloadTrigger): Promise<ReloadResult> {
    // One reload at a time: a SIGHUP during a watch-triggered reload waits for it, then runs.
    const run = async (): Promise<ReloadResult> => {
      // Parsed and validated on a worker thread: a large file must not stop the traffic.
      const loaded = await loadConfigFileOffThread(this.generation.runtime.file, this.env);
      if (!loaded.ok) {
        this.metrics.configReloads.labels("error").inc();
        this.logger.error(
          {
            trigger,
            problems: loaded.problems.map(formatProblem),
            ...(loaded.warnings.length ? { warnings: loaded.warnings.map(formatProblem) } : {}),
          },
          "config reload refused; the previous config keeps serving",
        );
        return { ok: false, problems: loaded.problems };
      }
      if (loaded.version === this.generation.runtime.version) {
        // Said and counted, so a SIGHUP that changed nothing is told from one that was lost.
        this.metrics.configReloads.labels("unchanged").inc();
        this.logger.info({ trigger, config_version: loaded.version }, "config unchanged");
        return { ok: true, version: loaded.version, changed: false, restartRequired: [] };
      }
      const split = splitRestartOnly(this.generation.runtime.config, loaded.config);
      const next = compileRuntime(split.config, {
        file: loaded.file,
        version: loaded.version,
        jwt: loaded.jwt,
        keyFile: loaded.keyFile,
      });
      // The new config may name another key file: watch what it is made of now.
      this.watcher?.watch(watchedFiles(next));
      const previous = this.generation.limiter;
      this.generation = Object.freeze({ runtime: next, limiter: this.newLimiter(next) });
      // Requests in flight keep the previous limiter to their end (post-charges included);
      // closing it only flushes its pending denial records and stops its timer.
      void previous.close();
      this.pools.retain(next.upstreams);
      this.logger.level = next.config.log.level;
      this.metrics.configReloads.labels("success").inc();
      this.logger.info(
        {
          trigger,
          config_version: next.version,
          routes: next.routeList.length,
          restart_required: split.restartRequired,
        },
        split.restartRequired.length
          ? "config reloaded; some settings only apply after a restart"
          : "config reloaded",
      );
      if (loaded.warnings.length) {
        this.logger.warn(
          { trigger, warnings: loaded.warnings.map(formatProblem) },
          "config reloaded with warnings",
        );
      }
      const result: ReloadResult = {
        ok: true,
        version: next.version,
        changed: true,
        restartRequired: split.restartRequired,
      };
      this.onReload?.(result);
      return result;
    };
    const previous = this.reloading ?? Promise.resolve(undefined);
    const current = previous.then(run, run);
    this.reloading = current;
    void current.finally(() => {
      if (this.reloading === current) this.reloading = null;
    });
    return current;
  }

  /**
   * Reloads when the config file or the JWT key file it names changes (config/watch.ts: their
   * directories are watched, each change after WATCH_DEBOUNCE_MS of quiet).
   */
  private watchConfig(): void {
    this.watcher = new ConfigWatcher(
      () => void this.reload("watch"),
      (err, dir) =>
        this.logger.warn(
          { err: err.message, dir },
          "cannot watch the config's files; use SIGHUP or POST /admin/reload",
        ),
      WATCH_DEBOUNCE_MS,
    );
    this.watcher.watch(watchedFiles(this.generation.runtime));
  }

  get currentRuntime(): Runtime {
    return this.generation.runtime;
  }

  get currentStore(): Store {
    return this.store;
  }

  private readonly tunnels = new Set<Socket>();
  /** Invalid credentials per client IP; outlives reloads like the local fallback. */
  private readonly authFailures = new AuthFailureThrottle();
  /** Callers denied without pause; the threshold is read from the current config each time. */
  private readonly sustained = new SustainedDenials(() => this.generation.runtime.config.sustained_denial, {
    // The log may name the caller; the metric only counts.
    onSustained: (caller, sinceMs) =>
      this.logger.warn(
        {
          caller,
          denied_since: new Date(sinceMs).toISOString(),
          sustained_denial_ms: this.generation.runtime.config.sustained_denial,
        },
        "caller denied without pause: probably retrying without backoff",
      ),
    onCount: (count) => this.metrics.sustainedDenials.set(count),
  });
  private readonly sustainedSweep = setInterval(() => this.sustained.sweep(Date.now()), 1000).unref();

  private async listen(
    serverOptions: typeof PROXY_SERVER_OPTIONS,
    role: "all" | "worker" | "primary",
    metricsText?: () => Promise<{ text: string; contentType: string }>,
  ): Promise<void> {
    if (role !== "primary") {
      const pipeline = createPipeline({
        generation: () => this.generation,
        pools: this.pools,
        metrics: this.metrics,
        logger: this.logger,
        inFlight: this.inFlight,
        sustained: this.sustained,
        tunnels: this.tunnels,
        authFailures: this.authFailures,
      });
      const proxy = createServer(serverOptions, pipeline.handle);
      this.proxyServer = proxy;
      proxy.on("clientError", answerClientError);
      proxy.on("upgrade", (req, socket, head) => pipeline.handleUpgrade(req, socket as Socket, head, proxy));
      // Expect: 100-continue is answered by the pipeline once the limits allow the request.
      proxy.on("checkContinue", pipeline.handle);
      proxy.on("connect", (req, socket) => pipeline.handleConnect(req, socket as Socket));
    }
    if (role !== "worker") {
      const admin = createAdminHandler({
        runtime: () => this.generation.runtime,
        store: () => this.store,
        limiter: () => this.generation.limiter,
        metrics: this.metrics,
        metricsText,
        reload: () => this.reload("admin"),
        describeStoreError: (err) => this.storeErrors.describe(err),
        logger: this.logger,
      });
      this.adminServer = createServer((req, res) => void admin(req, res));
    }
    try {
      if (this.proxyServer)
        this.proxyAddress = await listen(this.proxyServer, this.generation.runtime.config.listen);
      if (this.adminServer)
        this.adminAddress = await listen(this.adminServer, this.generation.runtime.config.admin.listen);
    } catch (err) {
      this.proxyServer?.close();
      this.adminServer?.close();
      await this.store.close();
      throw err;
    }
    this.logger.info(
      {
        proxy: this.proxyAddress ? urlOf(this.proxyAddress) : undefined,
        admin: this.adminAddress ? urlOf(this.adminAddress) : undefined,
        store: this.store.kind,
        ...targetsOf(this.generation.runtime),
        config: this.generation.runtime.file,
        config_version: this.generation.runtime.version,
        routes: this.generation.runtime.routeList.length,
        pid: process.pid,
      },
      // With workers, the primary says "tollgate listening" once all of them are.
      role === "all" ? "tollgate listening" : `${role} listening`,
    );
  }

  /**
   * Stops accepting, lets requests in flight finish for up to `graceMs`, then closes everything.
   * Resolves with the number of requests that had to be cut.
   */
  async stop(graceMs = this.generation.runtime.config.shutdown_grace): Promise<number> {
    const proxy = this.proxyServer;
    const admin = this.adminServer;
    this.watcher?.close();
    clearInterval(this.sustainedSweep);
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
      // Upgraded sockets left the server's keeping: close the tunnels still open.
      for (const socket of this.tunnels) socket.destroy();
      await this.pools.destroy();
    } else {
      await this.pools.close();
    }
    admin?.closeAllConnections();
    await this.generation.limiter.close();
    await this.store.close();
    await this.localStore.close();
    this.logger.info({ cut }, "tollgate stopped");
    return cut;
  }
}
