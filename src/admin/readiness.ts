// What /readyz answers: whether this gateway should be sent traffic, and if not, why.
import type { Runtime } from "../config/compile.js";
import { withDeadline } from "../deadline.js";
import { StoreTimeoutError } from "../errors.js";
import type { Health } from "../limits/stores/contract.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";

export interface Readiness {
  ready: boolean;
  reason?: string;
}

/** Each upstream's targets in rotation and ejected (proxy/upstreams.ts). */
export type UpstreamCounts = () => Iterable<[string, { healthy: number; ejected: number }]>;

/**
 * Ready when a config is loaded and the store answers, or when no route fails closed anyway.
 * The reason names the store's address and what is wrong (store-errors.ts), and each upstream
 * with no healthy target. Such an upstream does not make the gateway unready: every instance
 * sees the same targets, so taking this one out of rotation would not bring them back, and
 * would take the 429s and every other upstream's routes with it.
 */
export async function readiness(
  rt: Runtime,
  store: Pick<Health, "ping">,
  describe: (err: unknown) => string = (err) => new StoreErrors(storeAddress(rt.store)).describe(err),
  upstreams: UpstreamCounts = () => [],
): Promise<Readiness> {
  const stored = await storeReadiness(rt, store, describe);
  const down: string[] = [];
  for (const [name, { healthy, ejected }] of upstreams())
    if (healthy === 0) down.push(`upstream "${name}" has no healthy target (${ejected} ejected)`);
  if (down.length === 0) return stored;
  const reason = [stored.reason, ...down].filter((r) => r !== undefined).join("; ");
  return { ready: stored.ready, reason };
}

/**
 * A PING of the store within its timeout (at least 250 ms: a probe is not a request on the hot
 * path); rejects with a StoreTimeoutError past it. /readyz and /admin/health ask the same way.
 */
export function pingStore(rt: Runtime, store: Pick<Health, "ping">): Promise<void> {
  const ms = Math.max(rt.store.timeoutMs, 250);
  return withDeadline(store.ping(), ms, () => new StoreTimeoutError(ms));
}

async function storeReadiness(
  rt: Runtime,
  store: Pick<Health, "ping">,
  describe: (err: unknown) => string,
): Promise<Readiness> {
  const failsClosed = rt.routeList.some((r) => r.onFailure === "closed");
  try {
    await pingStore(rt, store);
    return { ready: true };
  } catch (err) {
    const reason = describe(err);
    return failsClosed
      ? { ready: false, reason }
      : { ready: true, reason: `${reason}; no route fails closed` };
  }
}
