// The top-denials list in a Redis Cluster. Its buckets have a hash tag of their own, so check.lua
// cannot count a denial in them (a script's keys share one slot): denials are counted here and
// written once a second, and before the top list is read. A burst of denials so costs a few
// commands, not two per denial.
import type { Cluster, Redis } from "ioredis";
import { TOP_BUCKET_TTL_MS } from "../contract.js";
import type { Boundary } from "./boundary.js";

/** How long counts wait before they are written, in ms. */
export const TOP_FLUSH_MS = 1000;

export class TopListCounts {
  /** Per top-list bucket, per caller: denials not written yet. */
  private counts = new Map<string, Map<string, number>>();
  private timer: NodeJS.Timeout | undefined;

  /** A write that fails or outlives the store timeout drops its counts. */
  constructor(
    private readonly client: Redis | Cluster,
    private readonly boundary: Boundary,
  ) {}

  count(topKey: string, caller: string): void {
    let callers = this.counts.get(topKey);
    if (!callers) {
      callers = new Map();
      this.counts.set(topKey, callers);
    }
    callers.set(caller, (callers.get(caller) ?? 0) + 1);
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), TOP_FLUSH_MS);
      this.timer.unref();
    }
  }

  /** Writes what was counted; never rejects (the top list is advisory). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.counts.size === 0) return;
    const counts = this.counts;
    this.counts = new Map();
    const writes: Promise<unknown>[] = [];
    for (const [topKey, callers] of counts) {
      for (const [caller, n] of callers) writes.push(this.client.zincrby(topKey, n, caller));
      writes.push(this.client.pexpire(topKey, TOP_BUCKET_TTL_MS));
    }
    await this.boundary.bounded(Promise.all(writes)).catch(() => {});
  }
}
