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

/**
 * Ready when a config is loaded and the store answers, or when no route fails closed anyway.
 * The reason names the store's address and what is wrong (store-errors.ts).
 */
export async function readiness(
  rt: Runtime,
  store: Pick<Health, "ping">,
  describe: (err: unknown) => string = (err) => new StoreErrors(storeAddress(rt.store)).describe(err),
): Promise<Readiness> {
  const failsClosed = rt.routeList.some((r) => r.onFailure === "closed");
  try {
    const ms = Math.max(rt.store.timeoutMs, 250);
    await withDeadline(store.ping(), ms, () => new StoreTimeoutError(ms));
    return { ready: true };
  } catch (err) {
    const reason = describe(err);
    return failsClosed
      ? { ready: false, reason }
      : { ready: true, reason: `${reason}; no route fails closed` };
  }
}
