// The gateway's current generation, the runtime and the limiter built for it, and the reloads
// that replace it. A reload loads the file off-thread, decides what to do with it
// (reload-decision.ts) and swaps the whole generation by one assignment: a request reads it once
// and keeps it to its end, so it never sees one half of a reload.
import type { Logger } from "pino";
import type { Alerts } from "../alerts/alerts.js";
import type { Runtime } from "../config/compile.js";
import { loadConfigFileOffThread } from "../config/load.js";
import { formatProblem } from "../config/problems.js";
import { ConfigWatcher } from "../config/watch.js";
import type { RemoteKeySets } from "../identity/idp/key-sets.js";
import { createGatewayLimiter } from "../limits/gateway-limiter.js";
import type { Limiter } from "../limits/limiter.js";
import type { LocalDecider } from "../limits/local-fallback.js";
import type { Store } from "../limits/stores/contract.js";
import type { Metrics } from "../observability/metrics.js";
import { overrideContext } from "../operator-state/override-rules.js";
import type { OverrideTable } from "../operator-state/override-table.js";
import type { Generation } from "../proxy/context.js";
import type { UpstreamPools } from "../proxy/upstreams.js";
import type { UsageLedger } from "../usage/ledger.js";
import {
  decideReload,
  type ReloadDecision,
  type ReloadResult,
  type ReloadTrigger,
} from "./reload-decision.js";

/** Editors and ConfigMap updates touch a file several times in a burst: wait for quiet. */
const WATCH_DEBOUNCE_MS = 200;

/** The files a runtime was loaded from: the config, the JWT key file and the listener's certificate. */
function watchedFiles(rt: Runtime): string[] {
  const files = [rt.file];
  if (rt.keyFile !== undefined) files.push(rt.keyFile);
  if (rt.listen.tls) files.push(rt.listen.tls.certFile, rt.listen.tls.keyFile);
  if (rt.rls) files.push(...rt.rls.files);
  return files;
}

/** A generation as the gateway builds it: with the usage ledger the request path records into. */
export type GatewayGeneration = Generation<Limiter> & { readonly usage: UsageLedger };

export interface GenerationDeps {
  /** The shared store; it outlives generations (its address only changes with a restart). */
  store: Store;
  /** The usage ledger (src/usage/); like the store it outlives generations, each exposing it as `usage`. */
  usage: UsageLedger;
  /** Budget alerts (src/alerts/); they outlive generations, each exposing them as `alerts`. */
  alerts?: Pick<Alerts, "raise"> | undefined;
  /** The local fallback's store; it outlives generations so an outage keeps its counting. */
  local: LocalDecider;
  pools: UpstreamPools;
  metrics: Metrics;
  logger: Logger;
  /** What `${VAR}` in the file is substituted from. */
  env: Readonly<Record<string, string | undefined>>;
  /** Called after each reload that changed the config (the primary tells its workers). */
  onReload?: ((result: ReloadResult) => void) | undefined;
  /** Operators' runtime overrides; like the store they outlive generations, each compiling them anew. */
  overrides?: Pick<OverrideTable, "forRuntime"> | undefined;
  /** The identity provider's keys; they outlive generations whose IdP settings are the same. */
  remoteKeys?: Pick<RemoteKeySets, "bind"> | undefined;
}

export class Generations {
  private generation: GatewayGeneration;
  private reloading: Promise<ReloadResult> | null = null;
  private watcher: ConfigWatcher | undefined;

  constructor(
    runtime: Runtime,
    private readonly deps: GenerationDeps,
  ) {
    this.generation = this.build(runtime);
  }

  /** Read once per request (the proxy) or per admin call, and kept to its end. */
  get current(): GatewayGeneration {
    return this.generation;
  }

  private build(runtime: Runtime): GatewayGeneration {
    this.deps.remoteKeys?.bind(runtime.identity.jwt);
    const limiter = createGatewayLimiter({
      store: this.deps.store,
      prefix: runtime.store.prefix,
      // Each limit's local share (store.local_fraction) is compiled into the runtime's plans.
      local: this.deps.local,
      // In-process state needs no cache in front of it; a shared store does.
      denyCache: this.deps.store.kind === "redis",
      overrides: this.deps.overrides?.forRuntime(overrideContext(runtime)),
    });
    const alerts = this.deps.alerts;
    return Object.freeze({ runtime, limiter, usage: this.deps.usage, ...(alerts ? { alerts } : {}) });
  }

  /**
   * Reads the file again and, if it is valid, swaps in a new generation. Requests in flight keep
   * the one they started with; pools of upstreams that changed are drained. A file that fails is
   * refused with every problem logged, and the previous config keeps serving.
   */
  reload(trigger: ReloadTrigger): Promise<ReloadResult> {
    // One reload at a time: a SIGHUP during a watch-triggered reload waits for it, then runs.
    const run = () => this.reloadOnce(trigger);
    const previous = this.reloading ?? Promise.resolve(undefined);
    const current = previous.then(run, run);
    this.reloading = current;
    void current.finally(() => {
      if (this.reloading === current) this.reloading = null;
    });
    return current;
  }

  private async reloadOnce(trigger: ReloadTrigger): Promise<ReloadResult> {
    const { metrics, logger } = this.deps;
    // Parsed and validated on a worker thread: a large file must not stop the traffic.
    const loaded = await loadConfigFileOffThread(this.generation.runtime.file, this.deps.env);
    const decision = decideReload(this.generation.runtime, loaded);
    switch (decision.action) {
      case "refuse":
        metrics.configReloads.labels("error").inc();
        logger.error(
          {
            trigger,
            problems: decision.result.problems.map(formatProblem),
            ...(decision.warnings.length ? { warnings: decision.warnings.map(formatProblem) } : {}),
          },
          "config reload refused; the previous config keeps serving",
        );
        return decision.result;
      case "keep":
        // Said and counted, so a SIGHUP that changed nothing is told from one that was lost.
        metrics.configReloads.labels("unchanged").inc();
        logger.info({ trigger, config_version: decision.result.version }, "config unchanged");
        return decision.result;
      case "swap":
        this.swap(trigger, decision);
        return decision.result;
    }
  }

  private swap(trigger: ReloadTrigger, decision: Extract<ReloadDecision, { action: "swap" }>): void {
    const { metrics, logger, pools } = this.deps;
    const next = decision.runtime;
    const restartRequired = decision.result.restartRequired;
    // The new config may name another key file: watch what it is made of now.
    this.watcher?.watch(watchedFiles(next));
    const previous = this.generation.limiter;
    this.generation = this.build(next);
    // Requests in flight keep the previous limiter to their end (post-charges included);
    // closing it only flushes its pending denial records and stops its timer.
    void previous.close();
    pools.retain(next.upstreams);
    logger.level = next.config.log.level;
    metrics.configReloads.labels("success").inc();
    logger.info(
      {
        trigger,
        config_version: next.version,
        routes: next.routeList.length,
        restart_required: restartRequired,
      },
      restartRequired.length
        ? "config reloaded; some settings only apply after a restart"
        : "config reloaded",
    );
    if (decision.warnings.length) {
      logger.warn(
        { trigger, warnings: decision.warnings.map(formatProblem) },
        "config reloaded with warnings",
      );
    }
    this.deps.onReload?.(decision.result);
  }

  /**
   * Reloads when the config file or the JWT key file it names changes (config/watch.ts: their
   * directories are watched, each change after WATCH_DEBOUNCE_MS of quiet).
   */
  watch(): void {
    this.watcher = new ConfigWatcher(
      () => void this.reload("watch"),
      (err, dir) =>
        this.deps.logger.warn(
          { err: err.message, dir },
          "cannot watch the config's files; use SIGHUP or POST /admin/reload",
        ),
      WATCH_DEBOUNCE_MS,
    );
    this.watcher.watch(watchedFiles(this.generation.runtime));
  }

  stopWatching(): void {
    this.watcher?.close();
  }
}
