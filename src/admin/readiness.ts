// What /readyz answers: whether this gateway should be sent traffic, and if not, why.
import type { Runtime } from "../config/compile.js";
import { withDeadline } from "../deadline.js";
import { StoreTimeoutError } from "../errors.js";
import type { KeysStatus } from "../identity/idp/remote-jwks.js";
import type { Health } from "../limits/stores/contract.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";

export interface Readiness {
  ready: boolean;
  reason?: string;
  /** Ready, but something an operator should know: the IdP's keys are kept past a failed fetch. */
  warning?: string;
}

/** The identity provider's key set of the running config (identity/idp/key-sets.ts). */
export type KeysReadiness = () => KeysStatus | undefined;

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
  keys: KeysReadiness = () => undefined,
): Promise<Readiness> {
  const stored = withKeys(await storeReadiness(rt, store, describe), keys());
  const down: string[] = [];
  for (const [name, { healthy, ejected }] of upstreams())
    if (healthy === 0) down.push(`upstream "${name}" has no healthy target (${ejected} ejected)`);
  if (down.length === 0) return stored;
  const reason = [stored.reason, ...down].filter((r) => r !== undefined).join("; ");
  return { ...stored, reason };
}

/**
 * Not ready before the IdP's keys were ever fetched: every JWT would be a 401, and another
 * instance may hold them. Once held, ready even while the IdP fails (the keys keep serving, and
 * every instance asks the same IdP), with a warning that says since when and why.
 */
export function withKeys(r: Readiness, status: KeysStatus | undefined): Readiness {
  if (status === undefined) return r;
  const failed = status.lastError
    ? `${status.lastError.message} (at ${new Date(status.lastError.atMs).toISOString()})`
    : undefined;
  if (status.state === "none") {
    const why = `the JWT keys (${status.source}) were never fetched: ${failed ?? "the first fetch is under way"}`;
    return { ready: false, reason: r.reason === undefined ? why : `${r.reason}; ${why}` };
  }
  const duplicates = status.duplicateKids?.length
    ? `the JWKS holds several keys under kid ${status.duplicateKids.map((k) => JSON.stringify(k)).join(", ")}: tokens with that kid are refused`
    : undefined;
  if (failed === undefined && status.state === "fresh")
    return duplicates === undefined ? r : { ...r, warning: duplicates };
  const fetched = new Date(status.fetchedAtMs ?? 0).toISOString();
  const expired =
    status.state === "stale"
      ? `, past their expiry at ${new Date(status.expiresAtMs ?? 0).toISOString()}`
      : "";
  const kept = `the JWT keys (${status.source}) fetched at ${fetched} keep serving${expired}: the last fetch failed: ${failed ?? "unknown"}`;
  const warning = duplicates === undefined ? kept : `${kept}; ${duplicates}`;
  return { ...r, warning };
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
