// Denial records: where a request's denial is written (the caller's log, the top-list bucket).
// The queue that writes them after the fact is the stores' (stores/denial-queue.ts).
import type { Caller } from "../identity/caller.js";
import type { LimitedRoute } from "./plan.js";
import { callerLabel, denialLogKey, topDenialsKey } from "./state-keys.js";
import { type DenialRecord, TOP_BUCKET_MS } from "./stores/contract.js";

/** Builds the record every checked request carries; the top-list key changes once per bucket. */
export class DenialRecords {
  private topBucket = -1;
  private topKey = "";

  constructor(private readonly prefix: string) {}

  /** The caller's log, under its own hash tag, and the top-list bucket of `nowMs`. */
  of(caller: Caller, route: LimitedRoute, nowMs: number): DenialRecord {
    const bucket = Math.floor(nowMs / TOP_BUCKET_MS);
    if (bucket !== this.topBucket) {
      this.topBucket = bucket;
      this.topKey = topDenialsKey(this.prefix, nowMs);
    }
    return {
      logKey: denialLogKey(this.prefix, caller),
      topKey: this.topKey,
      caller: callerLabel(caller),
      route: route.name,
    };
  }
}
