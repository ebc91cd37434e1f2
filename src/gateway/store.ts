// The only place that picks a store implementation: `store.url` chooses memory or Redis (single,
// cluster or sentinel), and a shared store gets the breaker in front of it, wired to the logs
// and the breaker metric. Adding a store adds its branch here.
import type { Logger } from "pino";
import { Alerts } from "../alerts/alerts.js";
import { createSender } from "../alerts/deliver.js";
import { MemoryAlertQueue, RedisAlertQueue } from "../alerts/queue.js";
import type { Runtime } from "../config/compile.js";
import { StoreError } from "../errors.js";
import { BreakerStore } from "../limits/breaker.js";
import type { LocalDecider } from "../limits/local-fallback.js";
import type { Store } from "../limits/stores/contract.js";
import { MemoryStore } from "../limits/stores/memory.js";
import { RedisStore } from "../limits/stores/redis/store.js";
import type { Metrics } from "../observability/metrics.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";
import { KeyLookup } from "../operator-state/api-key-lookup.js";
import { createKeyStore, type KeyStore } from "../operator-state/api-keys.js";
import {
  type AuditLog,
  type AuditSettings,
  type AuditStore,
  createAuditLog,
} from "../operator-state/audit.js";
import { MemoryChangeFeed, RedisChangeFeed } from "../operator-state/changes.js";
import { createOverrideStore, Overrides } from "../operator-state/overrides.js";
import { createUsageLedger, type LedgerStore } from "../usage/create-ledger.js";
import type { LedgerSettings, UsageLedger } from "../usage/ledger.js";

/** Most keys the local fallback (on_failure: local) holds; it only covers outages. */
const LOCAL_FALLBACK_MAX_KEYS = 100_000;

/** How long start-up waits for the store before serving with the failure policy. */
const STARTUP_STORE_WAIT_MS = 1000;

/** A down Redis errors on every reconnect attempt; once every 5 s is enough to notice. */
const STORE_ERROR_LOG_INTERVAL_MS = 5000;

/** The store, and where the usage ledger keeps its totals: on the store's connection, or in-process. */
export interface GatewayStore {
  store: Store;
  ledger: LedgerStore;
}

export function createStore(
  rt: Runtime,
  logger: Logger,
  metrics: Metrics,
  errors = new StoreErrors(storeAddress(rt.store)),
): GatewayStore {
  if (rt.store.url.startsWith("memory://")) return { store: new MemoryStore(), ledger: { kind: "memory" } };
  let lastLogged = 0;
  // Set below: the breaker is built around the store it is told of.
  let breakers: BreakerStore | undefined;
  const redis = new RedisStore({
    replicas: rt.store.replicas,
    onMasterChange: (from, to) => {
      if (!from) return;
      breakers?.forget(from);
      logger.warn(
        { from, to },
        "limit store master switched (Sentinel failover): the new master is asked at once, with a breaker of its own",
      );
    },
    url: rt.store.cluster || rt.store.sentinel ? undefined : rt.store.url,
    cluster: rt.store.cluster,
    sentinel: rt.store.sentinel,
    timeoutMs: rt.store.timeoutMs,
    onError: (err) => {
      errors.connectionFailed(err);
      const now = Date.now();
      if (now - lastLogged < STORE_ERROR_LOG_INTERVAL_MS) return;
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
  // The ledger shares the connection but not the breaker: a record is never on a request's
  // critical path, and a failed one is counted (createUsage) rather than answered.
  const ledger: LedgerStore = { kind: "redis", client: redis.client, timeoutMs: rt.store.timeoutMs };
  const store = new BreakerStore(
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
        `limit store breaker ${label}${shard ? ` for ${rt.store.cluster ? "shard" : "master"} ${shard}` : ""}`,
      );
    },
  );
  breakers = store;
  return { store, ledger };
}

/**
 * The onError of a store user off the request path (the usage ledger, the audit log, stored-key
 * lookups, overrides): a store failure counted in tollgate_store_errors_total{reason}, and one log
 * line at most every STORE_ERROR_LOG_INTERVAL_MS saying what failed, with how many were lost
 * since the last line when `lostField` names them. Never what the failed call carried.
 */
function storeFailureReporter(
  deps: { logger: Logger; metrics: Metrics; errors: StoreErrors },
  message: string,
  lostField?: string,
): (err: Error) => void {
  let lastLogged = 0;
  let lost = 0;
  return (err) => {
    if (err instanceof StoreError) deps.metrics.storeErrors.labels(err.reason).inc();
    lost++;
    const now = Date.now();
    if (now - lastLogged < STORE_ERROR_LOG_INTERVAL_MS) return;
    lastLogged = now;
    const problem = err instanceof StoreError ? deps.errors.describe(err) : err.message;
    deps.logger.warn(lostField ? { problem, [lostField]: lost } : { problem }, message);
    lost = 0;
  };
}

/** What the usage ledger reads from a runtime: the store's prefix, the calendar's zone, the retention. */
export function usageSettings(rt: Runtime): LedgerSettings {
  return { prefix: rt.store.prefix, tz: rt.config.calendar.tz, retentionMs: rt.config.usage.retention };
}

/**
 * The usage ledger over `ledger`, reading the current runtime's settings at each call. A record
 * that fails is counted in tollgate_store_errors_total{reason} when the store failed, and logged
 * at most every STORE_ERROR_LOG_INTERVAL_MS with how many were lost since the last line: the
 * request path only calls record() and never hears of it.
 */
export function createUsage(
  ledger: LedgerStore,
  runtime: () => Runtime,
  logger: Logger,
  metrics: Metrics,
  errors: StoreErrors,
): UsageLedger {
  return createUsageLedger(ledger, {
    settings: () => usageSettings(runtime()),
    onError: storeFailureReporter({ logger, metrics, errors }, "usage not recorded", "records_lost"),
  });
}

/**
 * Budget alerts (src/alerts/): their queue beside the ledger (the store's Redis, or in-process for
 * memory://) and a sender of their own. A queue call the store failed is counted in
 * tollgate_store_errors_total{reason} and logged as the ledger's failures are.
 */
export function createAlerts(
  ledger: LedgerStore,
  runtime: () => Runtime,
  logger: Logger,
  metrics: Metrics,
  errors: StoreErrors,
): { alerts: Alerts; close: () => Promise<void> } {
  const max = () => runtime().alerts.queueMax;
  const queue =
    ledger.kind === "redis"
      ? new RedisAlertQueue({
          client: ledger.client,
          prefix: () => runtime().store.prefix,
          max,
          timeoutMs: ledger.timeoutMs,
        })
      : new MemoryAlertQueue(max);
  const sender = createSender();
  const alerts = new Alerts({
    queue,
    settings: () => runtime().alerts,
    send: sender.send,
    logger,
    metrics,
    onError: storeFailureReporter(
      { logger, metrics, errors },
      "budget alerts: the alert queue failed; retrying",
    ),
  });
  return { alerts, close: sender.close };
}

/** What the audit log reads from a runtime: the store's prefix and admin.audit_retention. */
export function auditSettings(rt: Runtime): AuditSettings {
  return { prefix: rt.store.prefix, retentionMs: rt.admin.auditRetentionMs };
}

/**
 * The audit log beside the usage ledger: in the store's Redis, or in-process for memory://. An
 * entry that fails is counted in tollgate_store_errors_total{reason} and logged as the usage
 * ledger's are, with how many were lost and never with what they said: the admin request that
 * acted is answered as usual.
 */
export function createAudit(
  store: AuditStore,
  runtime: () => Runtime,
  logger: Logger,
  metrics: Metrics,
  errors: StoreErrors,
): AuditLog {
  return createAuditLog(store, {
    settings: () => auditSettings(runtime()),
    onError: storeFailureReporter({ logger, metrics, errors }, "audit entry not written", "entries_lost"),
  });
}

/**
 * How every instance learns of runtime changes (keys, overrides): the change stream and channel
 * in the store's Redis, or in-process for memory://. Not started: the gateway starts it once the
 * listeners of its changes are attached. A failure (a reconcile the store did not answer, the
 * subscriber's connection) is logged at most every STORE_ERROR_LOG_INTERVAL_MS; the next
 * reconcile catches up by itself.
 */
export function createChanges(
  store: LedgerStore,
  rt: Runtime,
  logger: Logger,
  metrics: Metrics,
): MemoryChangeFeed | RedisChangeFeed {
  let lastLogged = 0;
  const onError = (err: Error) => {
    const now = Date.now();
    if (now - lastLogged < STORE_ERROR_LOG_INTERVAL_MS) return;
    lastLogged = now;
    logger.warn({ err: { message: err.message } }, "runtime changes: the change feed failed; retrying");
  };
  const feed =
    store.kind === "memory"
      ? new MemoryChangeFeed({ onError })
      : new RedisChangeFeed({
          client: store.client,
          prefix: rt.store.prefix,
          onError,
          onDelivered: (via) => metrics.runtimeChanges.labels(via).inc(),
        });
  feed.onReset(() => {
    metrics.runtimeChanges.labels("reset").inc();
    logger.warn(
      "runtime changes may have been missed (the change stream was trimmed or Redis restarted empty): cached keys and overrides dropped",
    );
  });
  return feed;
}

/**
 * The keys issued at runtime (beside the store, like the ledger) and the request path's cached,
 * throttled way to them. A lookup the store failed is counted in tollgate_store_errors_total and
 * logged as the ledger's failures are.
 */
export function createRuntimeKeys(
  store: LedgerStore,
  feed: MemoryChangeFeed | RedisChangeFeed,
  /** The runtime at start: the store prefix is restart-only. */
  rt: Runtime,
  runtime: () => Runtime,
  logger: Logger,
  metrics: Metrics,
  errors: StoreErrors,
): { keys: KeyStore; lookup: KeyLookup } {
  const keys =
    store.kind === "memory" || !(feed instanceof RedisChangeFeed)
      ? createKeyStore({ kind: "memory", feed })
      : createKeyStore({
          kind: "redis",
          client: store.client,
          prefix: rt.store.prefix,
          timeoutMs: store.timeoutMs,
          feed,
        });
  const lookup = new KeyLookup({
    store: keys,
    feed,
    cacheMax: () => runtime().config.keys.cache,
    onLookup: (result) => metrics.keyLookups.labels(result).inc(),
    onError: storeFailureReporter(
      { logger, metrics, errors },
      "stored API key not looked up: the store failed; store.on_failure decides",
    ),
  });
  return { keys, lookup };
}

/**
 * The runtime overrides (/admin/overrides) beside the store, and the table every request of this
 * instance reads, kept current from the change feed. Not loaded: the gateway starts them with the
 * feed. A failed read is counted in tollgate_store_errors_total and logged as the ledger's are;
 * the table keeps what it had and the read is tried again.
 */
export function createOverrides(
  store: LedgerStore,
  feed: MemoryChangeFeed | RedisChangeFeed,
  /** The runtime at start: store.prefix cannot change without a restart (config/restart.ts). */
  rt: Runtime,
  logger: Logger,
  metrics: Metrics,
  errors: StoreErrors,
): Overrides {
  const overrideStore =
    store.kind === "memory" || !(feed instanceof RedisChangeFeed)
      ? createOverrideStore({ kind: "memory", feed })
      : createOverrideStore({
          kind: "redis",
          client: store.client,
          prefix: rt.store.prefix,
          timeoutMs: store.timeoutMs,
          feed,
        });
  return new Overrides({
    store: overrideStore,
    feed,
    onError: storeFailureReporter(
      { logger, metrics, errors },
      "runtime overrides not read: the store failed; the overrides this instance had stay in force until read again",
    ),
  });
}

/**
 * The store `on_failure: local` decides with while the shared one is down. The gateway keeps one
 * for its whole life: it outlives reloads, so an outage does not restart its counting.
 */
export function createLocalFallbackStore(): LocalDecider & Store {
  return new MemoryStore({ maxKeys: LOCAL_FALLBACK_MAX_KEYS });
}

/**
 * Start-up waits a moment for the store, then serves anyway: with the failure policy until the
 * store answers, and a warning (the URL without its password) saying so.
 */
export async function waitForStore(store: Store, rt: Runtime, logger: Logger): Promise<void> {
  if (await store.waitUntilReady(STARTUP_STORE_WAIT_MS)) return;
  logger.warn(
    { store: rt.store.url.replace(/\/\/[^@/]*@/, "//***@") },
    "limit store not reachable at start; serving with the failure policy until it is",
  );
}
