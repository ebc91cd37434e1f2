// The embedded store for `memory://` (one instance) and the local failure fallback. It runs the
// same arithmetic as the Redis scripts (algorithms/) on a bounded map, and keeps denial records
// as structured entries (no text to encode: nothing outside this process reads them).

import { STATE_TTL_SLACK_MS } from "../algorithms/algorithm.js";
import { type Leases, releaseLease, renewLease } from "../algorithms/concurrency.js";
import { ALGORITHMS, chargeStep, isRateLimit } from "../algorithms/index.js";
import type { LimitCheck, StoreDecision } from "../spec.js";
import {
  type AtOptions,
  type ChargedLimit,
  type CheckOptions,
  DENIAL_LOG_MAX,
  DENIAL_LOG_TTL_MS,
  type Denial,
  type DenialBatch,
  type DenialRecord,
  type GiveBack,
  type KeyListing,
  type Lease,
  type ListKeysBounds,
  type Store,
  TOP_BUCKET_TTL_MS,
} from "./contract.js";

interface Entry {
  /** Algorithm-specific (a number for a token bucket, a list for a sliding log, …). */
  state: unknown;
  expiresAtMs: number;
  /**
   * The algorithm that wrote a limit's state (absent for denial records). A limit whose
   * algorithm changed on a reload, or a client override under the plan's name, finds another
   * algorithm's state under its key: it is read as no state, as check.lua does.
   */
  algorithm?: LimitCheck["spec"]["algorithm"];
}

export interface MemoryStoreOptions {
  /**
   * Most keys held at once. Past it the least recently written key is dropped, which gives that
   * caller a fresh limit: keep it well above the number of active callers. 500k entries cost
   * roughly 100 MB.
   */
  maxKeys?: number;
  /** The clock; tests inject a fake one. */
  now?: () => number;
  /** How often expired keys are swept, in ms (0 disables the timer; expiry is still checked on read). */
  sweepIntervalMs?: number;
}

export const DEFAULT_MEMORY_MAX_KEYS = 500_000;

export class MemoryStore implements Store {
  readonly kind = "memory";
  private readonly entries = new Map<string, Entry>();
  private readonly maxKeys: number;
  private readonly now: () => number;
  private readonly sweepTimer: NodeJS.Timeout | undefined;

  constructor(options: MemoryStoreOptions = {}) {
    this.maxKeys = options.maxKeys ?? DEFAULT_MEMORY_MAX_KEYS;
    this.now = options.now ?? Date.now;
    const sweepMs = options.sweepIntervalMs ?? 10_000;
    if (sweepMs > 0) {
      this.sweepTimer = setInterval(() => this.sweep(), sweepMs);
      this.sweepTimer.unref();
    }
  }

  get size(): number {
    return this.entries.size;
  }

  async check(checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> {
    const nowMs = options?.nowMs ?? this.now();
    const decision = this.checkSync(checks, nowMs);
    if (!decision.allowed && options?.denial) this.recordDenial(options.denial, checks, decision, nowMs);
    return decision;
  }

  /**
   * The semantics of check.lua, in this process and at once (the local fallback, and tests at a
   * given time): shadow limits never deny and are charged only when they allow. Records nothing.
   */
  checkSync(checks: readonly LimitCheck[], nowMs: number = this.now()): StoreDecision {
    const steps = checks.map((c) => {
      const algorithm = ALGORITHMS[c.spec.algorithm];
      const state = this.stateOf(c, nowMs);
      // A token budget under max_cost must fit `need` units and takes only its cost (check.lua).
      if (c.need !== undefined) {
        const fits = algorithm.step(state, nowMs, c.spec, c.need, c.leaseId, c.batch);
        if (!fits.outcome.allowed) return fits;
      }
      return algorithm.step(state, nowMs, c.spec, c.cost, c.leaseId, c.batch);
    });
    let allowed = true;
    for (let i = 0; i < checks.length; i++) {
      if (!steps[i]!.outcome.allowed && !checks[i]!.spec.shadow) allowed = false;
    }
    if (allowed) {
      for (let i = 0; i < checks.length; i++) {
        const step = steps[i]!;
        const c = checks[i]!;
        if (step.outcome.allowed) this.write(c.key, step.nextState, nowMs + step.ttlMs, c.spec.algorithm);
      }
    }
    return { allowed, outcomes: steps.map((s) => (allowed ? s.outcome : s.uncharged)), decidedAt: nowMs };
  }

  /** A denial check.lua would record: the limits that denied (a shadow limit never does). */
  private recordDenial(
    denial: DenialRecord,
    checks: readonly LimitCheck[],
    decision: StoreDecision,
    nowMs: number,
  ): void {
    const limits: string[] = [];
    checks.forEach((c, i) => {
      if (!decision.outcomes[i]!.allowed && !c.spec.shadow) limits.push(c.spec.name);
    });
    const entries = [{ atMs: Math.floor(nowMs), route: denial.route, limits }];
    this.writeDenials(
      { logKey: denial.logKey, topKey: denial.topKey, caller: denial.caller, entries },
      nowMs,
    );
  }

  private writeDenials(b: DenialBatch, nowMs: number): void {
    const newestFirst = [...b.entries].reverse();
    const log = [...newestFirst, ...((this.read(b.logKey, nowMs) as Denial[]) ?? [])];
    this.write(b.logKey, log.slice(0, DENIAL_LOG_MAX), nowMs + DENIAL_LOG_TTL_MS);
    // Counted in place: copying the bucket would cost every denial the size of the top list.
    const top = (this.read(b.topKey, nowMs) as Map<string, number> | null) ?? new Map<string, number>();
    top.set(b.caller, (top.get(b.caller) ?? 0) + (b.count ?? b.entries.length));
    this.write(b.topKey, top, nowMs + TOP_BUCKET_TTL_MS);
  }

  async recordDenials(batch: readonly DenialBatch[]): Promise<void> {
    const nowMs = this.now();
    for (const b of batch) this.writeDenials(b, nowMs);
  }

  async peek(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]> {
    const nowMs = options?.nowMs ?? this.now();
    return checks.map((c) => this.view(c, nowMs));
  }

  /** What a zero-cost check of one limit sees, nothing written. */
  private view(c: LimitCheck, nowMs: number): ChargedLimit {
    const { uncharged } = ALGORITHMS[c.spec.algorithm].step(this.stateOf(c, nowMs), nowMs, c.spec, 0, "");
    return { remaining: uncharged.remaining, resetMs: uncharged.resetMs };
  }

  async denials(logKey: string): Promise<Denial[]> {
    return [...((this.read(logKey) as Denial[] | null) ?? [])];
  }

  async topDenials(topKeys: readonly string[], n: number): Promise<{ caller: string; count: number }[]> {
    const sum = new Map<string, number>();
    for (const key of topKeys) {
      for (const [caller, count] of (this.read(key) as Map<string, number> | null) ?? []) {
        sum.set(caller, (sum.get(caller) ?? 0) + count);
      }
    }
    return [...sum]
      .map(([caller, count]) => ({ caller, count }))
      .sort((a, b) => b.count - a.count || (a.caller < b.caller ? -1 : 1))
      .slice(0, n);
  }

  async reset(keys: readonly string[]): Promise<number> {
    let deleted = 0;
    for (const key of keys) {
      if (this.read(key) !== null) deleted++;
      this.entries.delete(key);
    }
    return deleted;
  }

  /** Walks the map in write order; an expired entry is skipped, not counted as found. */
  async listKeys(prefixes: readonly string[], bounds: ListKeysBounds): Promise<KeyListing> {
    const nowMs = this.now();
    const keys: string[] = [];
    let scanned = 0;
    for (const [key, entry] of this.entries) {
      if (scanned >= bounds.maxScanned) return { keys, complete: false };
      scanned++;
      if (entry.expiresAtMs <= nowMs || !prefixes.some((p) => key.startsWith(p))) continue;
      if (keys.length >= bounds.maxKeys) return { keys, complete: false };
      keys.push(key);
    }
    return { keys, complete: true };
  }

  async charge(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]> {
    return this.chargeSync(checks, options?.nowMs ?? this.now());
  }

  /**
   * Debits every rate limit (a concurrency limit holds a slot, whatever the cost: untouched) and
   * reports each limit as a zero-cost check would see it afterwards.
   */
  chargeSync(checks: readonly LimitCheck[], nowMs: number = this.now()): ChargedLimit[] {
    return checks.map((c) => {
      if (isRateLimit(c.spec)) {
        const step = chargeStep(this.stateOf(c, nowMs), nowMs, c.spec, c.cost);
        this.write(c.key, step.nextState, nowMs + step.ttlMs, c.spec.algorithm);
      }
      return this.view(c, nowMs);
    });
  }

  async refund(giveBacks: readonly GiveBack[], options?: AtOptions): Promise<void> {
    this.refundSync(giveBacks, options?.nowMs);
  }

  /** refund.lua's give-back, per limit by its algorithm's refund; the others give nothing back. */
  refundSync(giveBacks: readonly GiveBack[], nowMs: number = this.now()): void {
    for (const { check, units, at } of giveBacks) {
      const refund = ALGORITHMS[check.spec.algorithm].refund;
      if (!refund || !(units > 0)) continue;
      const state = this.stateOf(check, nowMs);
      if (state === null) continue;
      const next = refund(state, Number(at), nowMs, check.spec, units);
      if (next === undefined) continue;
      if (next === null) {
        this.entries.delete(check.key);
        continue;
      }
      const expiresAtMs =
        next.ttlMs === undefined ? this.entries.get(check.key)!.expiresAtMs : nowMs + next.ttlMs;
      this.write(check.key, next.state, expiresAtMs, check.spec.algorithm);
    }
  }

  async release(leases: readonly Lease[]): Promise<void> {
    this.releaseSync(leases);
  }

  releaseSync(leases: readonly Lease[]): void {
    for (const { key, leaseId } of leases) {
      const entry = this.entries.get(key);
      // The key keeps its expiry: it is the latest lease's, and that lease may still be live.
      if (entry?.algorithm === "concurrency") entry.state = releaseLease(entry.state as Leases, leaseId);
    }
  }

  async renew(leases: readonly Lease[], options?: AtOptions): Promise<void> {
    const nowMs = options?.nowMs ?? this.now();
    for (const l of leases) {
      const entry = this.entries.get(l.key);
      if (!entry || entry.expiresAtMs <= nowMs || entry.algorithm !== "concurrency") continue;
      const held = entry.state as Leases;
      const renewed = renewLease(held, l.leaseId, nowMs, l.leaseMs);
      if (renewed === held) continue;
      entry.state = renewed;
      entry.expiresAtMs = Math.max(entry.expiresAtMs, nowMs + Math.ceil(l.leaseMs) + STATE_TTL_SLACK_MS);
    }
  }

  /** Current state of a key, or null when absent or expired (for tests and the admin API). */
  read(key: string, nowMs: number = this.now()): unknown {
    const entry = this.entries.get(key);
    if (!entry) return null;
    if (entry.expiresAtMs <= nowMs) {
      this.entries.delete(key);
      return null;
    }
    return entry.state;
  }

  /** The state of a limit's key, or null when absent, expired or written by another algorithm. */
  private stateOf(c: LimitCheck, nowMs: number): unknown {
    const state = this.read(c.key, nowMs);
    if (state === null) return null;
    const by = this.entries.get(c.key)!.algorithm;
    return by === undefined || by === c.spec.algorithm ? state : null;
  }

  /** Remaining TTL of a key in ms, or null (mirrors PTTL for the conformance suite). */
  ttlMs(key: string, nowMs: number = this.now()): number | null {
    const entry = this.entries.get(key);
    if (!entry || entry.expiresAtMs <= nowMs) return null;
    return entry.expiresAtMs - nowMs;
  }

  async ping(): Promise<void> {}

  isConnected(): boolean {
    return true;
  }

  async waitUntilReady(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.entries.clear();
  }

  private write(
    key: string,
    state: unknown,
    expiresAtMs: number,
    algorithm?: LimitCheck["spec"]["algorithm"],
  ): void {
    // Re-inserting moves the key to the end of the map's order, so eviction drops the
    // least recently written key first.
    this.entries.delete(key);
    if (this.entries.size >= this.maxKeys) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(
      key,
      algorithm === undefined ? { state, expiresAtMs } : { state, expiresAtMs, algorithm },
    );
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) if (entry.expiresAtMs <= now) this.entries.delete(key);
  }
}
