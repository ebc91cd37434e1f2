// The only place that picks a store implementation: `store.url` chooses memory or Redis (single,
// cluster or sentinel), and a shared store gets the breaker in front of it, wired to the logs
// and the breaker metric. Adding a store adds its branch here.
import type { Logger } from "pino";
import type { Runtime } from "../config/compile.js";
import { StoreError } from "../errors.js";
import { BreakerStore } from "../limits/breaker.js";
import type { LocalDecider } from "../limits/local-fallback.js";
import type { Store } from "../limits/stores/contract.js";
import { MemoryStore } from "../limits/stores/memory.js";
import { RedisStore } from "../limits/stores/redis/store.js";
import type { Metrics } from "../observability/metrics.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";
import {
  createUsageLedger,
  type LedgerSettings,
  type LedgerStore,
  type UsageLedger,
} from "../usage/ledger.js";

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
  const redis = new RedisStore({
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
        `limit store breaker ${label}${shard ? ` for shard ${shard}` : ""}`,
      );
    },
  );
  return { store, ledger };
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
  let lastLogged = 0;
  let lost = 0;
  return createUsageLedger(ledger, {
    settings: () => usageSettings(runtime()),
    onError: (err) => {
      if (err instanceof StoreError) metrics.storeErrors.labels(err.reason).inc();
      lost++;
      const now = Date.now();
      if (now - lastLogged < STORE_ERROR_LOG_INTERVAL_MS) return;
      lastLogged = now;
      logger.warn(
        { problem: err instanceof StoreError ? errors.describe(err) : err.message, records_lost: lost },
        "usage not recorded",
      );
      lost = 0;
    },
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
