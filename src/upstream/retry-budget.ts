// How many retries an upstream may take: at most `ratio` of its requests over the last
// `windowMs`, plus `floor` retries per window so a quiet upstream can still retry at all
// (Finagle's RetryBudget, Envoy's retry budget). When every target is failing, each request
// would otherwise become 1 + retries requests exactly when the upstream can least take them;
// with the budget an outage costs at most `ratio` more load.
//
// Counted in buckets of windowMs / BUCKETS on an injected monotonic clock: a request costs one
// increment, a retry asks for a sum over BUCKETS numbers.

const BUCKETS = 10;

export const RETRY_BUDGET = {
  /** Retries allowed per request sent, over the window. */
  ratio: 0.2,
  windowMs: 10_000,
  /** Retries allowed per window whatever the traffic. */
  floor: 10,
} as const;

export type RetryBudgetSettings = { [K in keyof typeof RETRY_BUDGET]: number };

export class RetryBudget {
  private readonly requests = new Array<number>(BUCKETS).fill(0);
  private readonly retries = new Array<number>(BUCKETS).fill(0);
  /** Which bucket number each slot currently holds. */
  private readonly epoch = new Array<number>(BUCKETS).fill(Number.NEGATIVE_INFINITY);
  private readonly bucketMs: number;

  constructor(
    private readonly clock: () => number,
    private readonly settings: RetryBudgetSettings = RETRY_BUDGET,
  ) {
    this.bucketMs = settings.windowMs / BUCKETS;
  }

  /** A request (not a retry) was sent. */
  request(): void {
    this.requests[this.slot()]!++;
  }

  /** Takes one retry from the budget; false when it is spent. */
  tryRetry(): boolean {
    const slot = this.slot();
    let requests = 0;
    let retries = 0;
    for (let i = 0; i < BUCKETS; i++) {
      requests += this.requests[i]!;
      retries += this.retries[i]!;
    }
    if (retries + 1 > this.settings.floor + this.settings.ratio * requests) return false;
    this.retries[slot]!++;
    return true;
  }

  /** The current bucket's slot, emptying the slots that fell out of the window. */
  private slot(): number {
    const bucket = Math.floor(this.clock() / this.bucketMs);
    const slot = bucket % BUCKETS;
    if (this.epoch[slot] !== bucket) {
      // Every slot older than the window is emptied, not only this one: after a quiet spell
      // the slots in between hold counts from windows ago.
      for (let i = 0; i < BUCKETS; i++) {
        if (this.epoch[i]! <= bucket - BUCKETS) {
          this.requests[i] = 0;
          this.retries[i] = 0;
        }
      }
      this.epoch[slot] = bucket;
      this.requests[slot] = 0;
      this.retries[slot] = 0;
    }
    return slot;
  }
}
