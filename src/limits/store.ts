// The one interface both stores implement. Only server.ts chooses the implementation.
import type { LimitCheck, StoreDecision } from "./spec.js";

/** A concurrency slot a request holds: the limit's key, the request's lease id, its length. */
export interface Lease {
  key: string;
  leaseId: string;
  leaseMs: number;
}

/** A limit's state as a zero-cost check sees it (after a post-charge, or read by the admin API). */
export interface ChargedLimit {
  remaining: number;
  resetMs: number;
}

/**
 * Where a denial is written, by the same call that decides it: the caller's capped log and the
 * current bucket of the top-denials list. `text` is "<caller>\t<route>\t<limit names…>", the
 * names in the order of the request's checks.
 */
export interface DenialRecord {
  logKey: string;
  topKey: string;
  text: string;
}

/** One recorded denial: when, on which route, by which limits. */
export interface Denial {
  atMs: number;
  route: string;
  limits: string[];
}

/** Denials of one caller decided locally, to be written to its log and the top list. */
export interface DenialBatch {
  logKey: string;
  topKey: string;
  caller: string;
  /** The most recent denials (at most DENIAL_LOG_MAX), oldest first. */
  entries: Denial[];
  /** How many denials in all, for the top list (default: entries.length). */
  count?: number;
}

/** How check.lua stores one denial in a caller's log: "<ms>\t<route>\t<limit,limit>". */
export function encodeDenial(d: Denial): string {
  return `${Math.floor(d.atMs)}\t${d.route}\t${d.limits.join(",")}`;
}

export function decodeDenial(entry: string): Denial {
  const [at, route, limits] = entry.split("\t");
  return { atMs: Number(at), route: route ?? "", limits: limits ? limits.split(",") : [] };
}

/** Most recent denials kept per caller, and for how long. */
export const DENIAL_LOG_MAX = 50;
export const DENIAL_LOG_TTL_MS = 3_600_000;
/** The top list counts denials in five-minute buckets; an hour is the last twelve. */
export const TOP_BUCKET_MS = 300_000;
export const TOP_BUCKET_TTL_MS = 3_900_000;

export interface Store {
  readonly kind: "memory" | "redis";
  /**
   * Decides every limit of one request atomically, in one round trip. `nowMs` overrides the
   * store's clock (tests only). Rejects when the store cannot answer; a denial is a decision,
   * never a rejection.
   */
  check(checks: readonly LimitCheck[], nowMs?: number, record?: DenialRecord): Promise<StoreDecision>;
  /**
   * The server that decides these checks, for a store spread over several (a Redis Cluster
   * master, "host:port"); absent or "" when one server decides everything. The circuit breaker
   * keeps one state per shard, so a lost shard never fails the callers of the others.
   */
  shardOf?(checks: readonly LimitCheck[]): string;
  /**
   * Debits `cost` units from every limit whatever is left (post-charge); a limit may go into
   * debt. Rejects when the store cannot answer.
   */
  charge(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]>;
  /**
   * Gives back concurrency leases taken by `check` (a request ended). Rejects when the store
   * cannot answer; the lease then expires on its own.
   */
  release(leases: readonly Lease[]): Promise<void>;
  /**
   * Extends leases still held to `leaseMs` from now (requests that outlive their lease, such as
   * WebSockets); released or expired leases stay gone.
   */
  renew(leases: readonly Lease[], nowMs?: number): Promise<void>;
  /** Each limit as a zero-cost check sees it; consumes nothing (the admin API). */
  peek(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]>;
  /** A caller's recorded denials, newest first. */
  denials(logKey: string): Promise<Denial[]>;
  /** Callers by denials summed over the given top-list buckets, most first. */
  topDenials(topKeys: readonly string[], n: number): Promise<{ caller: string; count: number }[]>;
  /**
   * Writes denials decided without the store (the deny cache), batched per caller: newest last
   * in `entries`. The same log and top-list keys as denials recorded by check.
   */
  recordDenials(batch: readonly DenialBatch[]): Promise<void>;
  /** Deletes keys (a caller's reset); resolves with how many existed. */
  reset(keys: readonly string[]): Promise<number>;
  /** Resolves when the store answers; readiness uses it. */
  ping(): Promise<void>;
  /** Whether the store is believed reachable right now, without a round trip. */
  isConnected(): boolean;
  /** Resolves true once the store can answer, false after `timeoutMs`; never rejects. */
  waitUntilReady(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}
