// The gateway's limiter and the chain of decorators in front of its store, built once per config
// generation: a reload gets an empty deny cache (limits may have changed) and no reservations.
//
//   Limiter → ReservationStore → DenyCacheStore → the store (a BreakerStore around Redis)
//
// Reservations come first so that a request waiting for a refill in flight is answered by the
// deny cache when that refill found the bucket empty, without a store call of its own.
import { DenyCacheStore } from "./deny-cache.js";
import { type CallerOverrides, Limiter } from "./limiter.js";
import type { LocalDecider } from "./local-fallback.js";
import { ReservationStore } from "./reservations.js";
import type { DenialLog, LimitStore } from "./stores/contract.js";

export interface GatewayLimiterOptions {
  store: LimitStore & DenialLog;
  prefix: string;
  /** The in-process decider of on_failure: local; it outlives the limiter. */
  local?: LocalDecider;
  /** Deny repeat requests locally once the store denied them (shared stores only). */
  denyCache: boolean;
  /** This instance's clock (default Date.now). */
  now?: () => number;
  /** Operators' runtime overrides, as this generation compiles them. */
  overrides?: CallerOverrides | undefined;
}

export function createGatewayLimiter(options: GatewayLimiterOptions): Limiter {
  const now = options.now ?? Date.now;
  const denyCache = options.denyCache ? new DenyCacheStore(options.store, { now }) : undefined;
  return new Limiter({
    store: new ReservationStore(denyCache ?? options.store, { now }),
    prefix: options.prefix,
    local: options.local,
    denyCache,
    denialLog: options.store,
    now,
    ...(options.overrides ? { overrides: options.overrides } : {}),
  });
}
