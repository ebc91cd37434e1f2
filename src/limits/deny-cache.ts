// The deny cache: once the store has said a limit denies a request of cost c until T, this
// instance denies requests of cost ≥ c on that limit locally until T, with no store call (for a
// token budget under max_cost, c is what it must fit: its `need`). A
// caller hammering far past its limit then costs nothing but this map lookup.
//
// Why it never denies what the store would allow (the argument; test/unit/deny-cache.test.ts
// checks it as a property against the real arithmetic):
//  - The store's retry-after D for limit L and cost c is the earliest time L can admit c,
//    computed from L's state at the decision, assuming nothing else happens. Everything else
//    that can happen to a rate limit only makes it tighter: other requests consume, and
//    post-charges debit. Only time loosens it, and D already accounts for time. So L cannot
//    admit c (or more) before decision + D.
//  - T is taken from the time the check was *sent*, which is no later than the moment the store
//    decided: the local deadline is never later than the store's.
//  - Concurrency limits are never cached: a release can free a slot at any moment. Shadow limits
//    never deny, so they are never cached either.
//  - A reload builds a new limiter and so a new, empty cache (limits may have changed).
//  - An operator's runtime override (operator-state/override-table.ts) gives the caller's limit a new
//    spec object, of another size: an entry answers only for the spec it was learnt under, so a
//    raise is seen at the caller's next request, here as on every instance.
//  - Budgets (unit: tokens or usd) are the one kind of rate limit that loosens by itself: an AI
//    request gives back what it reserved beyond what it used once its answer ends. Their
//    denials are cached for at most BUDGET_DENIAL_MS (and forgotten here when a give-back goes
//    through this instance): a budget's next request on another instance waits at most that
//    long to see a give-back, and a flood on a spent budget still costs one store call per
//    second per instance.
//  - The exception is an operator's reset (DELETE /admin/callers/...): the instance that serves
//    it forgets the caller's entries at once; other instances keep denying until T, at most the
//    retry-after they already sent the caller.
//
// DenyCacheStore puts the cache in front of a store as a decorator (like the breaker): known
// denials are answered with `local: true` and queued to the store's denial log; the store's own
// denials are remembered.
import { DecoratedStore } from "./decorated-store.js";
import { isBudget, type LimitCheck, type LimitOutcome, type LimitSpec, type StoreDecision } from "./spec.js";
import type { AtOptions, CheckOptions, DenialLog, GiveBack, LimitStore } from "./stores/contract.js";
import { DenialQueue } from "./stores/denial-queue.js";

interface Entry {
  /** The spec the store denied under: another one (an override set or ended) asks the store. */
  spec: LimitSpec;
  /** Until when this instance answers for the store (a budget's: at most BUDGET_DENIAL_MS). */
  untilMs: number;
  /**
   * When the store said the limit admits the cost again: what the client is told to wait for. A
   * budget's entry ends long before (give-backs may loosen it), but its refusal still says the
   * store's wait, so a client is not told "1 s" for a budget spent until the month's end.
   */
  retryAtMs: number;
  /** The smallest cost the store denied on this limit: smaller requests may still fit. */
  cost: number;
  remaining: number;
  resetAtMs: number;
}

export interface LocalDenial {
  /** Indexes of the checks denied locally, and their outcomes as of now. */
  violated: { index: number; outcome: LimitOutcome }[];
}

export const DENY_CACHE_MAX = 100_000;

/** The longest a budget's denial is cached: give-backs can loosen it before its retry-after. */
export const BUDGET_DENIAL_MS = 1000;

export class DenyCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly maxEntries = DENY_CACHE_MAX) {}

  get size(): number {
    return this.entries.size;
  }

  /** Remembers the limits the store denied for `checks`; `sentAtMs` is when the check was sent. */
  remember(checks: readonly LimitCheck[], outcomes: readonly LimitOutcome[], sentAtMs: number): void {
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const o = outcomes[i]!;
      if (o.allowed || c.spec.shadow || c.spec.algorithm === "concurrency" || o.retryAfterMs <= 0) continue;
      const entry: Entry = {
        spec: c.spec,
        untilMs: sentAtMs + (isBudget(c.spec) ? Math.min(o.retryAfterMs, BUDGET_DENIAL_MS) : o.retryAfterMs),
        retryAtMs: sentAtMs + o.retryAfterMs,
        // What was asked: a token budget under max_cost must fit `need`, and its retry-after is
        // when `need` fits; a request asking less may fit earlier.
        cost: c.need ?? c.cost,
        remaining: o.remaining,
        resetAtMs: sentAtMs + o.resetMs,
      };
      const prior = this.entries.get(c.key);
      if (prior && prior.spec === c.spec && prior.untilMs >= entry.untilMs && prior.cost <= entry.cost)
        continue;
      this.entries.delete(c.key);
      if (this.entries.size >= this.maxEntries) {
        const oldest = this.entries.keys().next();
        if (!oldest.done) this.entries.delete(oldest.value);
      }
      this.entries.set(c.key, entry);
    }
  }

  /** The limits of `checks` known to deny right now, or null when the store must decide. */
  check(checks: readonly LimitCheck[], nowMs: number): LocalDenial | null {
    let violated: LocalDenial["violated"] | null = null;
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const entry = this.entries.get(c.key);
      if (!entry) continue;
      if (nowMs >= entry.untilMs || entry.spec !== c.spec) {
        this.entries.delete(c.key);
        continue;
      }
      if ((c.need ?? c.cost) < entry.cost || c.spec.shadow || c.spec.algorithm === "concurrency") continue;
      violated ??= [];
      violated.push({
        index: i,
        outcome: {
          allowed: false,
          remaining: entry.remaining,
          resetMs: Math.max(0, Math.ceil(entry.resetAtMs - nowMs)),
          retryAfterMs: Math.ceil(entry.retryAtMs - nowMs),
        },
      });
    }
    return violated ? { violated } : null;
  }

  /** Forgets the given keys (an operator reset them). */
  forget(keys: Iterable<string>): void {
    for (const key of keys) this.entries.delete(key);
  }
}

/**
 * What a local denial reports for the limits it did not deny: nothing is known of them (the store
 * was not asked). A decision with `local: true` is read by its denied outcomes only.
 */
const NOT_DENIED: LimitOutcome = Object.freeze({ allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0 });

export interface DenyCacheStoreOptions {
  /** This instance's clock: when a check is sent. */
  now: () => number;
  maxEntries?: number;
}

export class DenyCacheStore extends DecoratedStore<LimitStore & DenialLog> {
  private readonly cache: DenyCache;
  private readonly queue: DenialQueue;
  private readonly now: () => number;

  constructor(inner: LimitStore & DenialLog, options: DenyCacheStoreOptions) {
    super(inner);
    this.now = options.now;
    this.cache = new DenyCache(options.maxEntries);
    this.queue = new DenialQueue(inner);
  }

  /**
   * The denial this instance already knows for `checks`, answered (and recorded) as check would,
   * without asking the store; null when the store would have to decide.
   */
  known(checks: readonly LimitCheck[], options?: CheckOptions): StoreDecision | null {
    const nowMs = options?.nowMs ?? this.now();
    const known = this.cache.check(checks, nowMs);
    return known ? this.deniedLocally(checks, known, nowMs, options) : null;
  }

  async check(checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> {
    const sentAtMs = options?.nowMs ?? this.now();
    const known = this.cache.check(checks, sentAtMs);
    if (known) return this.deniedLocally(checks, known, sentAtMs, options);
    const decision = await this.inner.check(checks, options);
    if (!decision.allowed) this.cache.remember(checks, decision.outcomes, sentAtMs);
    return decision;
  }

  /** Answered now; recorded in the caller's log at the next flush. */
  private deniedLocally(
    checks: readonly LimitCheck[],
    known: LocalDenial,
    nowMs: number,
    options: CheckOptions | undefined,
  ): StoreDecision {
    const outcomes: LimitOutcome[] = checks.map(() => NOT_DENIED);
    const limits: string[] = [];
    for (const v of known.violated) {
      outcomes[v.index] = v.outcome;
      limits.push(checks[v.index]!.spec.name);
    }
    if (options?.denial) this.queue.add(options.denial, nowMs, limits);
    return { allowed: false, outcomes, local: true };
  }

  /** What goes back may admit what was denied: this instance asks the store again at once. */
  override refund(giveBacks: readonly GiveBack[], options?: AtOptions): Promise<void> {
    this.cache.forget(giveBacks.map((g) => g.check.key));
    return this.inner.refund(giveBacks, options);
  }

  /** Writes the denials decided here since the last flush (the admin API calls it before reading). */
  flushDenials(): Promise<void> {
    return this.queue.flush();
  }

  /** Forgets what the cache knows of these keys (an operator reset them). */
  forget(keys: Iterable<string>): void {
    this.cache.forget(keys);
  }

  /** Stops the flush timer after a last flush. */
  close(): Promise<void> {
    return this.queue.close();
  }
}
