// What the limits need of a store, split by who needs it: the limiter decides and charges
// (LimitStore), the deny cache and the admin API write and read denial records (DenialLog), the
// admin API inspects and resets (Inspector), readiness and shutdown ask after the connection
// (Health). A Store is all four; decorators (breaker, deny cache, reservations) wrap a Store and
// are one. Records are structured here; each adapter encodes them its own way, and only there.
import type { LimitCheck, StoreDecision } from "../spec.js";

/** A concurrency slot a request holds: the limit's key, the request's lease id, its length. */
export interface Lease {
  key: string;
  leaseId: string;
  leaseMs: number;
}

/**
 * Units a check took that go back (an AI request's reservation beyond what it used): into the
 * window or bucket the check took them from, as decided `at` (StoreDecision.decidedAt).
 */
export interface GiveBack {
  check: LimitCheck;
  units: number;
  at: string | number;
}

/** A limit's state as a zero-cost check sees it (after a post-charge, or read by the admin API). */
export interface ChargedLimit {
  remaining: number;
  resetMs: number;
}

/**
 * Where a denial is written by the store that decides it: the caller's capped log and the
 * current bucket of the top-denials list (the memory store writes at once; Redis within a
 * second, and before its log or top list is read). The limits named are those of the checks
 * that denied, by their spec names, in the order of the request's checks.
 */
export interface DenialRecord {
  logKey: string;
  topKey: string;
  /** How the admin API names the caller: `client:<id>` or `ip:<addr>`. */
  caller: string;
  route: string;
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

/** Most recent denials kept per caller, and for how long. */
export const DENIAL_LOG_MAX = 50;
export const DENIAL_LOG_TTL_MS = 3_600_000;
/** The top list counts denials in five-minute buckets; an hour is the last twelve. */
export const TOP_BUCKET_MS = 300_000;
export const TOP_BUCKET_TTL_MS = 3_900_000;

export interface AtOptions {
  /** Overrides the store's clock, in ms (tests only). */
  nowMs?: number;
}

export interface CheckOptions extends AtOptions {
  /** Where to record the request's denial, if it is denied. */
  denial?: DenialRecord;
}

export interface LimitStore {
  readonly kind: "memory" | "redis";
  /**
   * Decides every limit of one request atomically, in one round trip. Rejects with a StoreError
   * (src/errors.ts) when the store cannot answer; a denial is a decision, never a rejection.
   */
  check(checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision>;
  /**
   * The server that decides these checks, for a store spread over several (a Redis Cluster
   * master, "host:port"); absent or "" when one server decides everything. The circuit breaker
   * keeps one state per shard, so a lost shard never fails the callers of the others.
   */
  shardOf?(checks: readonly LimitCheck[]): string;
  /** Debits each check's `cost` whatever is left (post-charge); a limit may go into debt. */
  charge(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]>;
  /**
   * Gives back units checks took, as far as each still can (nothing into a window that has
   * passed). Best effort: resolves once done, rejects when the store cannot answer (the units
   * then stay taken, which over-counts and never over-admits).
   */
  refund(giveBacks: readonly GiveBack[], options?: AtOptions): Promise<void>;
  /** Gives back concurrency leases taken by `check`; on a rejection the lease expires on its own. */
  release(leases: readonly Lease[]): Promise<void>;
  /** Extends leases still held to `leaseMs` from now; released or expired leases stay gone. */
  renew(leases: readonly Lease[], options?: AtOptions): Promise<void>;
}

export interface DenialLog {
  /** Writes denials decided without the store (the deny cache), batched per caller. */
  recordDenials(batch: readonly DenialBatch[]): Promise<void>;
  /** A caller's recorded denials, newest first. */
  denials(logKey: string): Promise<Denial[]>;
  /** Callers by denials summed over the given top-list buckets, most first. */
  topDenials(topKeys: readonly string[], n: number): Promise<{ caller: string; count: number }[]>;
}

/** How much one key listing may read and return (Inspector.listKeys). */
export interface ListKeysBounds {
  /** Most keys returned. */
  maxKeys: number;
  /** Most keys examined, per slot or server read (a scan's COUNT summed, a slot's keys read). */
  maxScanned: number;
}

/** Keys found by a bounded listing. */
export interface KeyListing {
  keys: string[];
  /** False when a bound stopped the listing before it saw every key: more may exist. */
  complete: boolean;
}

export interface Inspector {
  /** Each limit as a zero-cost check sees it; consumes nothing. */
  peek(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]>;
  /** Deletes keys (a caller's reset); resolves with how many existed. */
  reset(keys: readonly string[]): Promise<number>;
  /**
   * The keys that start with one of `prefixes` (the admin API's "which values did this caller
   * key by"), within `bounds`; the order is the store's. Optional, so a store written against an
   * earlier contract keeps compiling: a store without it lists nothing and says so (complete:
   * false). Only for operators: on Redis it walks the keyspace (SCAN) or a cluster slot.
   */
  listKeys?(prefixes: readonly string[], bounds: ListKeysBounds): Promise<KeyListing>;
}

export interface Health {
  /** Resolves when the store answers; readiness uses it. */
  ping(): Promise<void>;
  /** Whether the store is believed reachable right now, without a round trip. */
  isConnected(): boolean;
  /** Resolves true once the store can answer, false after `timeoutMs`; never rejects. */
  waitUntilReady(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export interface Store extends LimitStore, DenialLog, Inspector, Health {}
