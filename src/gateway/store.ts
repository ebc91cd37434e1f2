// The only place that picks a store implementation: `store.url` chooses memory or Redis (single,
// cluster or sentinel), and a shared store gets the breaker in front of it, wired to the logs
// and the breaker metric. Adding a store adds its branch here.
import type { Logger } from "pino";
import type { Runtime } from "../config/compile.js";
import { BreakerStore } from "../limits/breaker.js";
import type { LocalDecider } from "../limits/local-fallback.js";
import type { Store } from "../limits/stores/contract.js";
import { MemoryStore } from "../limits/stores/memory.js";
import { RedisStore } from "../limits/stores/redis/store.js";
import type { Metrics } from "../observability/metrics.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";

/** Most keys the local fallback (on_failure: local) holds; it only covers outages. */
const LOCAL_FALLBACK_MAX_KEYS = 100_000;

/** How long start-up waits for the store before serving with the failure policy. */
const STARTUP_STORE_WAIT_MS = 1000;

/** A down Redis errors on every reconnect attempt; once every 5 s is enough to notice. */
const STORE_ERROR_LOG_INTERVAL_MS = 5000;

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
