// At most one fetch per interval for keys nobody has: a token whose kid the cached set lacks may
// be signed with a key the IdP rotated in a moment ago, so it may ask for a fetch, but a flood of
// forged kids must not turn into a flood of fetches at the IdP. Pure: the caller gives the time.

export class RefetchGate {
  private lastMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly intervalMs: number) {}

  /**
   * Whether a fetch may start now; true also starts the interval. Only misses pass through
   * here: the fetches at start and before expiry are few by themselves (cache_floor), and a
   * key rotated in just after one of them must not wait out an interval.
   */
  tryPass(nowMs: number): boolean {
    if (nowMs - this.lastMs < this.intervalMs) return false;
    this.lastMs = nowMs;
    return true;
  }

  /** When the next miss may fetch. */
  nextAtMs(): number {
    return this.lastMs + this.intervalMs;
  }
}
