// Redis's clock as seen from this process, one per shard, so that a deadline of the gateway
// (its monotonic clock) can be written in Redis's (TIME) without trusting the two to agree.
// Every script reply carries the Redis time the script read; that read happened after the call
// was written and before its reply was handled here, so
//
//     redisTime − receivedAt  ≤  offset  ≤  redisTime − sentAt
//
// (offset: Redis time minus local time). The store uses the lower bound: a local deadline
// translated with it falls at or before the true one, so a script refuses a little early, never
// late. The tightest lower bound of the last one or two horizons is kept (a reply that sat in a
// lagging event loop gives a loose one and does not replace it); a sample whose upper bound is
// below the estimate proves that the clock moved back (a failover to a master whose clock is
// behind, a clock step), and replaces it at once.

/** Samples older than one to two horizons no longer count (Redis's clock may drift). */
export const CLOCK_HORIZON_MS = 1000;

/** The local clock every deadline and sample is read on: monotonic, in ms. */
export const localNow = (): number => performance.now();

export class RedisClock {
  private current: number | undefined;
  private previous: number | undefined;
  private periodStart = 0;

  /** Redis time minus local time, at most the true offset; undefined before any reply. */
  get offset(): number | undefined {
    if (this.previous === undefined) return this.current;
    if (this.current === undefined) return this.previous;
    return Math.max(this.current, this.previous);
  }

  /** A reply read at `receivedAt` to a call written at `sentAt` said Redis's time was `redisMs`. */
  sample(redisMs: number, sentAt: number, receivedAt: number): void {
    if (!Number.isFinite(redisMs)) return;
    const lower = redisMs - receivedAt;
    const upper = redisMs - sentAt;
    const estimate = this.offset;
    if (estimate !== undefined && upper < estimate) {
      // The clock moved back: what was learnt before no longer holds.
      this.current = lower;
      this.previous = undefined;
      this.periodStart = receivedAt;
      return;
    }
    if (this.current === undefined || receivedAt - this.periodStart > CLOCK_HORIZON_MS) {
      // The period that ends is kept for one more horizon, unless it is older than that.
      this.previous = receivedAt - this.periodStart > 2 * CLOCK_HORIZON_MS ? undefined : this.current;
      this.current = lower;
      this.periodStart = receivedAt;
      return;
    }
    if (lower > this.current) this.current = lower;
  }

  /** The Redis time at which the local clock reads `localMs`, at the latest; undefined if unknown. */
  toRedis(localMs: number): number | undefined {
    const offset = this.offset;
    return offset === undefined ? undefined : localMs + offset;
  }

  /**
   * Redis's time now, as well as it is known: learnt from replies, else this host's wall clock
   * (before the first reply). What a calendar window's period starts are computed around; the
   * script still decides at its own clock, among them.
   */
  estimateNow(): number {
    return this.toRedis(localNow()) ?? Date.now();
  }
}

/** Clocks kept per shard; a cluster has a handful of masters, renamed ones are forgotten. */
const MAX_CLOCKS = 64;

/** Redis's clock per shard (a cluster's masters may disagree), learnt from script replies. */
export class ShardClocks {
  private readonly clocks = new Map<string, RedisClock>();

  /** The clock of one shard ("" on a single Redis). */
  of(shard: string): RedisClock {
    let clock = this.clocks.get(shard);
    if (!clock) {
      if (this.clocks.size >= MAX_CLOCKS) this.clocks.clear();
      clock = new RedisClock();
      this.clocks.set(shard, clock);
    }
    return clock;
  }
}
