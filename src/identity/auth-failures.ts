// Invalid credentials counted per client IP, so that guessing keys or JWTs from one address is
// throttled and a flood of bogus JWTs stops costing a signature check each. In process, per
// instance: a shared count would cost a store round trip per failure, which is what an attacker
// wants; N instances therefore let through N × limit failures per window, which is still far too
// few to guess a 256-bit key and bounds the CPU a guesser can burn.

/** Most addresses tracked at once; past it the oldest entries are forgotten first. */
export const AUTH_FAILURES_MAX_ADDRESSES = 100_000;

interface Entry {
  windowStartMs: number;
  failures: number;
}

export class AuthFailureThrottle {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly maxAddresses = AUTH_FAILURES_MAX_ADDRESSES) {}

  /**
   * Milliseconds until `ipKey` may present credentials again, or 0 when it may now. `limit`
   * failures within `windowMs` block it until that window ends.
   */
  blockedForMs(ipKey: string, limit: number, windowMs: number, nowMs: number): number {
    const entry = this.entries.get(ipKey);
    if (!entry) return 0;
    const endsAt = entry.windowStartMs + windowMs;
    if (nowMs >= endsAt) {
      this.entries.delete(ipKey);
      return 0;
    }
    return entry.failures >= limit ? endsAt - nowMs : 0;
  }

  /** Counts one invalid credential from `ipKey`. */
  recordFailure(ipKey: string, windowMs: number, nowMs: number): void {
    const entry = this.entries.get(ipKey);
    if (entry && nowMs < entry.windowStartMs + windowMs) {
      entry.failures++;
      return;
    }
    if (entry) this.entries.delete(ipKey);
    else if (this.entries.size >= this.maxAddresses) this.evict(nowMs, windowMs);
    // Re-inserted last: Map order is insertion order, so the first entries are the oldest.
    this.entries.set(ipKey, { windowStartMs: nowMs, failures: 1 });
  }

  get size(): number {
    return this.entries.size;
  }

  /** Drops expired entries, and the oldest tenth if none had expired. */
  private evict(nowMs: number, windowMs: number): void {
    for (const [key, entry] of this.entries) {
      if (nowMs >= entry.windowStartMs + windowMs) this.entries.delete(key);
    }
    if (this.entries.size < this.maxAddresses) return;
    let drop = Math.max(1, Math.floor(this.maxAddresses / 10));
    for (const key of this.entries.keys()) {
      this.entries.delete(key);
      if (--drop === 0) break;
    }
  }
}
