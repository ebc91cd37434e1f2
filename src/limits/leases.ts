// Concurrency leases: the ids a request's slots are held under, and holding them while the
// request runs (renewed, then given back exactly once).
import { randomBytes } from "node:crypto";
import { storeFailureReason } from "../errors.js";
import type { StoreResult } from "./decision.js";
import type { LimitCheck } from "./spec.js";
import type { Lease, LimitStore } from "./stores/contract.js";

/**
 * Lease ids: unique across instances (a random instance part) and cheap per request (a counter).
 * The same id never reaches two requests, so one request's release never frees another's slot.
 */
const LEASE_INSTANCE = randomBytes(9).toString("base64url");
let leaseSequence = 0;
export function nextLeaseId(): string {
  leaseSequence = (leaseSequence + 1) % Number.MAX_SAFE_INTEGER;
  return `${LEASE_INSTANCE}:${leaseSequence.toString(36)}`;
}

/** The lease a concurrency check took, or null for any other limit. */
export function leaseOf(c: LimitCheck): Lease | null {
  if (c.spec.algorithm !== "concurrency" || c.leaseId === undefined) return null;
  return { key: c.key, leaseId: c.leaseId, leaseMs: c.spec.leaseMs };
}

/** Leases are renewed this often while their request is in flight (a third of the lease). */
export function renewEveryMs(leases: readonly Lease[]): number {
  return Math.max(250, Math.min(...leases.map((l) => l.leaseMs)) / 3);
}

/** What holding leases needs of a store: the one that granted them. */
export type LeaseHolder = Pick<LimitStore, "release" | "renew">;

/**
 * Holds a request's leases: renews them while it runs (a long download, a WebSocket may outlive
 * `lease`) and gives them back once, whatever calls the returned release twice. A failed renewal
 * is ignored: the lease then runs out on its own, which is what it is for.
 */
export function holdLeases(store: LeaseHolder, leases: Lease[]): () => Promise<void> {
  let released: Promise<void> | null = null;
  const renewal = setInterval(() => void store.renew(leases).catch(() => {}), renewEveryMs(leases));
  renewal.unref();
  return () => {
    clearInterval(renewal);
    released ??= store.release(leases);
    return released;
  };
}

/** The gateway's release: the same, reporting a failure instead of throwing it. */
export function releaseOnce(store: LeaseHolder, leases: Lease[]): () => Promise<StoreResult> {
  const release = holdLeases(store, leases);
  let result: Promise<StoreResult> | null = null;
  return () => {
    result ??= release().then(
      (): StoreResult => ({ ok: true }),
      (err: unknown): StoreResult => ({ ok: false, reason: storeFailureReason(err) }),
    );
    return result;
  };
}
