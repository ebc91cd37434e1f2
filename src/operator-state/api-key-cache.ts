// What an instance remembers of stored keys, so that a request with a known key costs no Redis
// command, and the throttle that keeps a flood of unknown keys from becoming a flood of lookups.
// Pure: no I/O, time passed in; the wiring (key-lookup.ts) drops entries on the change feed.
//
// Positive entries (a key found) stay until a change names their hash, the feed resets, the
// key's own expiry passes, or the least recently used one makes room. Negative entries (a hash
// the store did not have) live NEGATIVE_TTL_MS and in a map of their own, so a flood of random
// keys (from many addresses, past the throttle) can evict only other negative entries, never a
// customer's key. A key created after its hash was negatively cached is found anyway: creating
// it publishes a change that drops the entry.
//
// The throttle is a token bucket per client IP key (identity/peer.ts): LOOKUP_BURST lookups at
// once, LOOKUP_RATE_PER_S after. One address sending N unknown keys over T seconds thus causes
// at most LOOKUP_BURST + LOOKUP_RATE_PER_S × T lookups, whatever N is. Past it a key is treated
// as unknown without asking: a valid key first presented from that address during the flood is
// refused until its bucket refills (the price of the bound). The buckets are bounded too: past
// THROTTLE_MAX_ADDRESSES the longest-idle address is forgotten (it starts again with a full
// burst, which only that address can use).

/**
 * Positive entries held at most (config `keys.cache`): about 700 bytes of heap each (the record
 * and the caller made of it; bench/runtime-keys.mjs), so about 70 MB at the default.
 */
export const DEFAULT_KEY_CACHE_MAX = 100_000;

/** How long "no such key" is believed without asking again. */
export const NEGATIVE_TTL_MS = 10_000;

/** Negative entries held at most: a flood past the throttle recycles these, nothing else. */
export const NEGATIVE_CACHE_MAX = 10_000;

/** Store lookups one client IP may cause at once… */
export const LOOKUP_BURST = 20;
/** …and per second after that. */
export const LOOKUP_RATE_PER_S = 5;

/** Client IPs whose lookup buckets are held at most. */
export const THROTTLE_MAX_ADDRESSES = 100_000;

/** The most lookups one address can cause over `seconds` (the stated bound). */
export function lookupBound(seconds: number): number {
  return LOOKUP_BURST + Math.ceil(LOOKUP_RATE_PER_S * Math.max(0, seconds));
}

export type CacheAnswer<V> = { kind: "found"; value: V } | { kind: "unknown" } | undefined;

interface Positive<V> {
  value: V;
  /** Epoch ms past which the key is no longer valid; Infinity: never. */
  expiresAtMs: number;
}

export class KeyCache<V> {
  /** Insertion order is recency: a hit moves its entry to the end, eviction takes the first. */
  private readonly positive = new Map<string, Positive<V>>();
  /** hash → until when it is known to be absent; insertion order is age. */
  private readonly negative = new Map<string, number>();

  constructor(
    private readonly now: () => number,
    /** Asked at each insert, so a reload that changes `keys.cache` applies. */
    private readonly max: () => number = () => DEFAULT_KEY_CACHE_MAX,
    private readonly negativeTtlMs = NEGATIVE_TTL_MS,
    private readonly negativeMax = NEGATIVE_CACHE_MAX,
  ) {}

  /** What is known of `hash`: found, known unknown, or undefined (ask the store). */
  get(hash: string): CacheAnswer<V> {
    const hit = this.positive.get(hash);
    if (hit) {
      if (hit.expiresAtMs <= this.now()) {
        // Expired: Redis has let it go (PEXPIREAT), so it is unknown now, without asking.
        this.positive.delete(hash);
        this.rememberUnknown(hash);
        return { kind: "unknown" };
      }
      this.positive.delete(hash);
      this.positive.set(hash, hit);
      return { kind: "found", value: hit.value };
    }
    const until = this.negative.get(hash);
    if (until === undefined) return undefined;
    if (until > this.now()) return { kind: "unknown" };
    this.negative.delete(hash);
    return undefined;
  }

  /** A key the store has, valid until `expiresAtMs` (undefined: no expiry). */
  remember(hash: string, value: V, expiresAtMs: number | undefined): void {
    this.negative.delete(hash);
    this.positive.delete(hash);
    // A loop, not one eviction: after a reload made the cache smaller, it shrinks to fit.
    const max = Math.max(1, this.max());
    while (this.positive.size >= max) {
      const oldest = this.positive.keys().next().value;
      if (oldest === undefined) break;
      this.positive.delete(oldest);
    }
    this.positive.set(hash, { value, expiresAtMs: expiresAtMs ?? Number.POSITIVE_INFINITY });
  }

  /** A hash the store does not have. */
  rememberUnknown(hash: string): void {
    this.negative.delete(hash);
    if (this.negative.size >= this.negativeMax) {
      const oldest = this.negative.keys().next().value;
      if (oldest !== undefined) this.negative.delete(oldest);
    }
    this.negative.set(hash, this.now() + this.negativeTtlMs);
  }

  /** A change named this hash: forget both kinds of entry. */
  invalidate(hash: string): void {
    this.positive.delete(hash);
    this.negative.delete(hash);
  }

  /** The feed may have missed changes: forget everything. */
  clear(): void {
    this.positive.clear();
    this.negative.clear();
  }

  get size(): { positive: number; negative: number } {
    return { positive: this.positive.size, negative: this.negative.size };
  }
}

interface Bucket {
  tokens: number;
  atMs: number;
}

/** Store lookups per client IP key: a token bucket each, bounded in number. */
export class LookupThrottle {
  /** Insertion order is last use: a take moves the bucket to the end. */
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly now: () => number,
    private readonly burst = LOOKUP_BURST,
    private readonly ratePerS = LOOKUP_RATE_PER_S,
    private readonly maxAddresses = THROTTLE_MAX_ADDRESSES,
  ) {}

  /** True when `ipKey` may cause one more lookup now (and takes it). */
  take(ipKey: string): boolean {
    const now = this.now();
    let bucket = this.buckets.get(ipKey);
    if (bucket) {
      this.buckets.delete(ipKey);
      const refill = ((now - bucket.atMs) / 1000) * this.ratePerS;
      bucket.tokens = Math.min(this.burst, bucket.tokens + Math.max(0, refill));
      bucket.atMs = now;
    } else {
      if (this.buckets.size >= this.maxAddresses) {
        const idlest = this.buckets.keys().next().value;
        if (idlest !== undefined) this.buckets.delete(idlest);
      }
      bucket = { tokens: this.burst, atMs: now };
    }
    this.buckets.set(ipKey, bucket);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  get size(): number {
    return this.buckets.size;
  }
}
