// The gateway: one store for its life, the current generation (generation.ts), the proxy and
// admin listeners (listeners.ts), and a graceful stop. This class composes them; which store a
// URL means is decided in store.ts, what a reload does in reload-decision.ts.
import type { Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Logger } from "pino";
import { createAdminHandler } from "../admin/server.js";
import type { Alerts } from "../alerts/alerts.js";
import type { Runtime } from "../config/compile.js";
import type { ListenerTls } from "../config/listener-tls.js";
import { loadConfigFile } from "../config/load.js";
import { ConfigError, formatProblem } from "../config/problems.js";
import { traceSettings } from "../config/telemetry.js";
import { AuthFailureThrottle } from "../identity/auth-failures.js";
import { fetchJson } from "../identity/idp/fetch-json.js";
import { RemoteKeySets } from "../identity/idp/key-sets.js";
import type { Store } from "../limits/stores/contract.js";
import { createLogger } from "../observability/log.js";
import { Metrics } from "../observability/metrics.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";
import { SustainedDenials } from "../observability/sustained.js";
import { startTracing, type Tracing } from "../observability/tracing.js";
import type { KeyLookup } from "../operator-state/api-key-lookup.js";
import type { KeyStore } from "../operator-state/api-keys.js";
import type { AuditLog } from "../operator-state/audit.js";
import type { MemoryChangeFeed, RedisChangeFeed } from "../operator-state/changes.js";
import type { Overrides } from "../operator-state/overrides.js";
import { createPipeline } from "../proxy/pipeline.js";
import { UpstreamPools } from "../proxy/upstreams.js";
import type { RlsServer } from "../rls/server.js";
import type { UsageLedger } from "../usage/ledger.js";
import { Generations } from "./generation.js";
import {
  createAdminServer,
  createProxyListener,
  listen,
  PROXY_SERVER_OPTIONS,
  type ProxyListener,
  type ProxyServerOptions,
  targetsOf,
  urlOf,
} from "./listeners.js";
import { type ReloadResult, type ReloadTrigger, runtimeOf } from "./reload-decision.js";
import { finishInFlight } from "./shutdown.js";
import {
  createAlerts,
  createAudit,
  createChanges,
  createLocalFallbackStore,
  createOverrides,
  createRuntimeKeys,
  createStore,
  createUsage,
  waitForStore,
} from "./store.js";

export type { ReloadResult, ReloadTrigger } from "./reload-decision.js";

export interface GatewayOptions {
  configFile: string;
  env?: Readonly<Record<string, string | undefined>>;
  logger?: Logger;
  /** Reload when the file changes (default true). */
  watch?: boolean;
  /** Overrides of PROXY_SERVER_OPTIONS (tests shorten the timeouts). */
  serverOptions?: Partial<ProxyServerOptions>;
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

export class Gateway {
  readonly logger: Logger;
  readonly metrics = new Metrics();
  private readonly store: Store;
  /** Tokens and requests per caller and period, beside the store; outlives reloads. */
  private readonly usage: UsageLedger;
  /** Budget alerts: raised by requests, delivered by every instance from the store's queue. */
  private readonly alerts: { alerts: Alerts; close: () => Promise<void> };
  /** Every write made through the admin API, beside the store; outlives reloads. */
  private readonly audit: AuditLog;
  /** How this instance learns of every instance's runtime changes (keys, overrides). */
  readonly changes: MemoryChangeFeed | RedisChangeFeed;
  /** Keys issued at runtime (/admin/keys), and the request path's cached way to them. */
  private readonly keys: KeyStore;
  private readonly keyLookup: KeyLookup;
  /** Operators' runtime sizes of callers' limits (/admin/overrides), applied by every generation. */
  private readonly overrides: Overrides;
  /** Store failures in an operator's words, with the cause of the last failed connection. */
  private readonly storeErrors: StoreErrors;
  /** The local fallback store outlives reloads: an outage does not restart its counting. */
  private readonly localStore = createLocalFallbackStore();
  /** Each upstream's targets, their pools and health; outlive reloads (proxy/upstreams.ts). */
  private readonly pools: UpstreamPools;
  /** The runtime and its limiter, swapped whole by one assignment on reload. */
  private readonly generations: Generations;
  private readonly inFlight = { count: 0 };
  private readonly tunnels = new Set<Socket>();
  /** Invalid credentials per client IP; outlives reloads like the local fallback. */
  private readonly authFailures = new AuthFailureThrottle();
  /** Callers denied without pause; the threshold is read from the current config each time. */
  private readonly sustained = new SustainedDenials(
    () => this.generations.current.runtime.config.sustained_denial,
    {
      // The log may name the caller; the metric only counts.
      onSustained: (caller, sinceMs) =>
        this.logger.warn(
          {
            caller,
            denied_since: new Date(sinceMs).toISOString(),
            sustained_denial_ms: this.generations.current.runtime.config.sustained_denial,
          },
          "caller denied without pause: probably retrying without backoff",
        ),
      onCount: (count) => this.metrics.sustainedDenials.set(count),
    },
  );
  /**
   * The identity provider's JWT keys (identity.jwt issuer or jwks_url); every process fetches
   * its own (N workers: N + 1 fetches per refresh), failures logged without the keys.
   */
  private readonly remoteKeys = new RemoteKeySets({
    fetchJson,
    now: Date.now,
    schedule: (run, delayMs) => {
      // Past 2^31 - 1 ms setTimeout fires at once: a refresh loop. --check bounds the settings too.
      const timer = setTimeout(run, Math.min(delayMs, 2 ** 31 - 1)).unref();
      return { cancel: () => clearTimeout(timer) };
    },
    onFetch: (outcome) => this.metrics.jwksFetches.labels(outcome).inc(),
    onFailure: (message, kept) =>
      this.logger.warn(
        { err: message, kept_last_keys: kept },
        kept
          ? "cannot fetch the identity provider's JWT keys; the last ones fetched keep serving"
          : "cannot fetch the identity provider's JWT keys; JWTs are refused until they arrive",
      ),
  });
  private readonly sustainedSweep = setInterval(() => this.sustained.sweep(Date.now()), 1000).unref();
  private proxyServer: ProxyListener | undefined;
  /** `telemetry.traces`, started before the proxy listener; undefined: tracing off. */
  private tracing: Tracing | undefined;
  /** The certificate the proxy listener serves (listen.tls), replaced by a reload that changes it. */
  private servedTls: ListenerTls | undefined;
  private adminServer: Server | undefined;
  /** Envoy's rate-limit service (rls), served beside the admin listener when configured. */
  private rlsServer: RlsServer | undefined;
  proxyAddress: AddressInfo | undefined;
  /** The port the rate-limit service bound, when `rls` is configured. */
  rlsPort: number | undefined;
  /** `host:port` the rate-limit service listens on, as bound (logged as `rls`). */
  rlsAddress: string | undefined;
  adminAddress: AddressInfo | undefined;

  /** A test gave the listener its idle timeout: the config's does not replace it. */
  private readonly idleTimeoutFixed: boolean;

  private constructor(runtime: Runtime, logger: Logger, options: GatewayOptions) {
    this.logger = logger;
    this.idleTimeoutFixed = options.serverOptions?.keepAliveTimeout !== undefined;
    this.pools = new UpstreamPools({ logger, metrics: this.metrics });
    // Built now, not at the first request: the health checks start with the gateway.
    this.pools.retain(runtime.upstreams);
    // The store's address cannot change without a restart (config/restart.ts).
    this.storeErrors = new StoreErrors(storeAddress(runtime.store));
    const created = createStore(runtime, logger, this.metrics, this.storeErrors);
    this.store = created.store;
    this.usage = createUsage(
      created.ledger,
      () => this.generations.current.runtime,
      logger,
      this.metrics,
      this.storeErrors,
    );
    this.alerts = createAlerts(
      created.ledger,
      () => this.generations.current.runtime,
      logger,
      this.metrics,
      this.storeErrors,
    );
    this.audit = createAudit(
      created.ledger,
      () => this.generations.current.runtime,
      logger,
      this.metrics,
      this.storeErrors,
    );
    this.changes = createChanges(created.ledger, runtime, logger, this.metrics);
    // An operator reset limit state through any instance: this process's deny cache forgets
    // those keys too, or it would deny until the retry-after it cached.
    this.changes.onChange((change) => {
      if (change.kind === "reset") this.generations.current.limiter.forgetDenials(change.keys);
    });
    ({ keys: this.keys, lookup: this.keyLookup } = createRuntimeKeys(
      created.ledger,
      this.changes,
      runtime,
      () => this.generations.current.runtime,
      logger,
      this.metrics,
      this.storeErrors,
    ));
    this.overrides = createOverrides(
      created.ledger,
      this.changes,
      runtime,
      logger,
      this.metrics,
      this.storeErrors,
    );
    this.generations = new Generations(runtime, {
      store: this.store,
      usage: this.usage,
      alerts: this.alerts.alerts,
      local: this.localStore,
      pools: this.pools,
      metrics: this.metrics,
      logger,
      env: options.env ?? process.env,
      overrides: this.overrides.table,
      remoteKeys: {
        bind: (verifier) => {
          this.remoteKeys.bind(verifier);
          if (verifier?.remote !== undefined)
            this.metrics.reportJwksKeyAge(() => {
              const at = this.remoteKeys.status()?.fetchedAtMs;
              return at === undefined ? undefined : Date.now() - at;
            });
        },
      },
      onReload: (result) => {
        this.applyCertificate();
        this.applyIdleTimeout();
        options.onReload?.(result);
      },
    });
  }

  /** Loads the config (throwing ConfigError with every problem) and starts both listeners. */
  static async start(options: GatewayOptions): Promise<Gateway> {
    const loaded = await loadConfigFile(options.configFile, options.env ?? process.env);
    if (!loaded.ok) throw new ConfigError(loaded.problems);
    const runtime = runtimeOf(loaded);
    const logger = options.logger ?? createLogger(loaded.config.log.level);
    // Warnings (config/checks.ts) do not stop the gateway; with workers, the primary logs them.
    if (loaded.warnings.length && options.role !== "worker") {
      logger.warn({ warnings: loaded.warnings.map(formatProblem) }, "config loaded with warnings");
    }
    const gateway = new Gateway(runtime, logger, options);
    const role = options.role ?? "all";
    // Only a process that serves requests traces them; OpenTelemetry is loaded only then.
    const traces = loaded.config.telemetry?.traces;
    if (traces && role !== "primary")
      gateway.tracing = await startTracing(traceSettings(traces), logger, (outcome, spans) =>
        gateway.metrics.traceSpans.labels(outcome).inc(spans),
      );
    await waitForStore(gateway.store, runtime, logger);
    // The IdP's keys before the first request when it answers within fetch_timeout; when it
    // does not, the gateway starts all the same, not ready, refusing JWTs until they arrive.
    await gateway.remoteKeys.firstFetch();
    // After every listener of the feed is attached (the key cache, the overrides).
    gateway.changes.start();
    // The overrides in force from the first request (bounded by the store timeout; a store that
    // cannot answer is read again in the background).
    await gateway.overrides.start();
    await gateway.listen(
      { ...PROXY_SERVER_OPTIONS, keepAliveTimeout: runtime.config.idle_timeout, ...options.serverOptions },
      role,
      options.metricsText,
    );
    // Every instance sends what is due, whichever instance queued it; the primary of workers too.
    gateway.alerts.alerts.start();
    // Workers reload when their primary says so; only one process watches the file.
    if (options.watch !== false && role !== "worker") gateway.generations.watch();
    return gateway;
  }

  /**
   * Reads the file again and, if it is valid, swaps in a new runtime (generation.ts). Triggered
   * by the file watch, SIGHUP (or the primary, for a worker) and POST /admin/reload.
   */
  reload(trigger: ReloadTrigger): Promise<ReloadResult> {
    return this.generations.reload(trigger);
  }

  /** Requests being served right now (a graceful stop waits for them). */
  get requestsInFlight(): number {
    return this.inFlight.count;
  }

  get currentRuntime(): Runtime {
    return this.generations.current.runtime;
  }

  get currentStore(): Store {
    return this.store;
  }

  /** The usage ledger requests record into (each generation's `usage`) and /admin/usage reads. */
  get currentUsage(): UsageLedger {
    return this.generations.current.usage;
  }

  private async listen(
    serverOptions: ProxyServerOptions,
    role: "all" | "worker" | "primary",
    metricsText?: () => Promise<{ text: string; contentType: string }>,
  ): Promise<void> {
    const generations = this.generations;
    if (role !== "primary") {
      const pipeline = createPipeline({
        generation: () => generations.current,
        pools: this.pools,
        metrics: this.metrics,
        logger: this.logger,
        inFlight: this.inFlight,
        sustained: this.sustained,
        tunnels: this.tunnels,
        authFailures: this.authFailures,
        storedKeys: this.keyLookup,
        tracing: this.tracing,
        scheme: generations.current.runtime.listen.tls ? "https" : "http",
      });
      this.servedTls = generations.current.runtime.listen.tls;
      this.proxyServer = createProxyListener(serverOptions, pipeline, this.servedTls, this.logger);
    }
    if (role !== "worker") {
      const admin = createAdminHandler({
        runtime: () => generations.current.runtime,
        store: () => this.store,
        limiter: () => generations.current.limiter,
        usage: () => this.usage,
        metrics: this.metrics,
        metricsText,
        reload: () => this.reload("admin"),
        describeStoreError: (err) => this.storeErrors.describe(err),
        upstreams: () => this.pools.counts(),
        jwks: () => this.remoteKeys.status(),
        sustained: () => this.sustained.current(),
        upstreamTargets: () => this.pools.targets(),
        logger: this.logger,
        audit: this.audit,
        keys: () => this.keys,
        overrides: () => this.overrides,
        announceReset: (keys) => this.changes.publish({ kind: "reset", keys: [...keys] }),
      });
      this.adminServer = createAdminServer(admin);
    }
    const config = generations.current.runtime.config;
    const tls = generations.current.runtime.listen.tls;
    try {
      if (this.proxyServer)
        this.proxyAddress = await listen(this.proxyServer.server, generations.current.runtime.listen.address);
      if (this.adminServer) this.adminAddress = await listen(this.adminServer, config.admin.listen);
      const rls = generations.current.runtime.rls;
      if (rls && role !== "worker") {
        // Loaded only here: a gateway without `rls` never loads grpc-js and the protos.
        const { startRlsServer } = await import("../rls/server.js");
        this.rlsServer = await startRlsServer(rls.listen, {
          generation: () => generations.current,
          metrics: this.metrics,
          logger: this.logger,
        });
        this.rlsPort = this.rlsServer.port;
        this.rlsAddress = rlsAddressOf(rls.listen, this.rlsPort);
      }
    } catch (err) {
      this.proxyServer?.close();
      this.adminServer?.close();
      this.overrides.stop();
      await this.changes.stop();
      await this.store.close();
      await this.pools.destroy();
      await this.tracing?.shutdown();
      throw err;
    }
    const runtime = generations.current.runtime;
    this.logger.info(
      {
        proxy: this.proxyAddress ? urlOf(this.proxyAddress, this.proxyServer?.secure) : undefined,
        ...(tls && this.proxyServer ? { tls: certificateOf(tls) } : {}),
        admin: this.adminAddress ? urlOf(this.adminAddress) : undefined,
        ...(this.rlsAddress !== undefined ? { rls: this.rlsAddress } : {}),
        store: this.store.kind,
        ...targetsOf(runtime),
        config: runtime.file,
        config_version: runtime.version,
        routes: runtime.routeList.length,
        pid: process.pid,
      },
      // With workers, the primary says "tollgate listening" once all of them are.
      role === "all" ? "tollgate listening" : `${role} listening`,
    );
  }

  /**
   * Exports the spans still buffered. The exporter's own timeout bounds it; a collector that
   * hangs past that as well costs the stop at most EXPORT_FLUSH_MS more, and the spans.
   */
  private async flushTraces(): Promise<void> {
    const tracing = this.tracing;
    if (!tracing) return;
    this.tracing = undefined;
    const limitMs =
      (this.generations.current.runtime.config.telemetry?.traces?.timeout ?? 0) + EXPORT_FLUSH_MS;
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      tracing.shutdown().then(
        () => "flushed",
        (err: unknown) => (err instanceof Error ? err.message : String(err)),
      ),
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve(`not flushed within ${limitMs} ms`), limitMs);
      }),
    ]);
    clearTimeout(timer);
    if (outcome !== "flushed")
      this.logger.warn({ err: outcome }, "trace export at shutdown failed; spans dropped");
  }

  /** After a reload: `idle_timeout` for the connections opened from now on (unless a test fixed it). */
  private applyIdleTimeout(): void {
    if (this.idleTimeoutFixed) return;
    this.proxyServer?.setIdleTimeout(this.generations.current.runtime.config.idle_timeout);
  }

  /**
   * After a reload: the listener serves the certificate the new runtime was loaded with, if it
   * changed (connections already open keep theirs). The loader refused a pair that cannot
   * serve, so this one can.
   */
  private applyCertificate(): void {
    const tls = this.generations.current.runtime.listen.tls;
    const listener = this.proxyServer;
    const served = this.servedTls;
    if (!tls || !listener?.useCertificate || (tls.cert === served?.cert && tls.key === served.key)) return;
    try {
      listener.useCertificate(tls);
      this.servedTls = tls;
      this.logger.info({ tls: certificateOf(tls) }, "listener certificate reloaded");
    } catch (err) {
      this.logger.error(
        { err: (err as Error).message, cert_file: tls.certFile },
        "listener certificate not reloaded; the previous one keeps serving",
      );
    }
  }

  /**
   * Stops accepting, lets requests in flight finish for up to `graceMs`, then closes everything.
   * Resolves with the number of requests that had to be cut.
   */
  async stop(graceMs = this.generations.current.runtime.config.shutdown_grace): Promise<number> {
    const proxy = this.proxyServer;
    const admin = this.adminServer;
    this.generations.stopWatching();
    this.remoteKeys.stop();
    clearInterval(this.sustainedSweep);
    proxy?.close();
    admin?.close();
    const rlsStopped = this.rlsServer?.stop();
    const cut = await finishInFlight(proxy, this.inFlight, graceMs);
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
    // Every request has ended: the spans of the last ones are exported before the process exits.
    await this.flushTraces();
    await rlsStopped;
    await this.generations.current.limiter.close();
    await this.alerts.alerts.stop();
    await this.alerts.close();
    this.overrides.stop();
    await this.changes.stop();
    await this.store.close();
    await this.localStore.close();
    this.logger.info({ cut }, "tollgate stopped");
    return cut;
  }
}

/** Beyond the exporter's timeout, how long a stop waits for the last spans to be exported. */
const EXPORT_FLUSH_MS = 1000;

/** The served certificate in the logs: which file, which certificate, until when. */
function certificateOf(tls: ListenerTls): { cert_file: string; fingerprint: string; not_after: string } {
  return { cert_file: tls.certFile, fingerprint: tls.fingerprint, not_after: tls.notAfter };
}

/** `host:port` of the rate-limit service as bound (port 0 in the config: the one chosen). */
function rlsAddressOf(listen: string, port: number): string {
  const host = listen.slice(0, listen.lastIndexOf(":"));
  return `${host === "" ? "0.0.0.0" : host}:${port}`;
}
