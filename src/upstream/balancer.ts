// Smooth weighted round robin (nginx's): every pick adds each eligible item's weight to its
// running score, takes the highest score and subtracts the total from it. Over any run of
// `sum of weights` picks each item is chosen exactly `weight` times, interleaved (1:1:2 gives
// c a b c, not a b c c), so a weight is a share of the requests however few there are.
//
// Why not undici's BalancedPool: it gives every origin the same weight (100) and only moves it
// on connection errors, so configured weights cannot be expressed; it never stops sending to a
// dead origin (its weight bottoms out at 1, not 0); and it cannot say which origin a request
// went to, which passive health and "retry on another target" need.

export interface Weighted {
  readonly weight: number;
}

export class SmoothWeightedRoundRobin<T extends Weighted> {
  private readonly score: number[];

  constructor(readonly items: readonly T[]) {
    this.score = items.map(() => 0);
  }

  /**
   * The next item among those `eligible` accepts, or null when it accepts none. An item left
   * out is not scored, so it does not come back owed a burst of requests.
   */
  next(eligible: (item: T) => boolean): T | null {
    const { items, score } = this;
    let total = 0;
    let best = -1;
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (!eligible(item)) continue;
      score[i]! += item.weight;
      total += item.weight;
      if (best === -1 || score[i]! > score[best]!) best = i;
    }
    if (best === -1) return null;
    score[best]! -= total;
    return items[best]!;
  }
}
