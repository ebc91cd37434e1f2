// Denial records: where a request's denial is written (by the store call that decides it), and the
// denials decided in this process (the deny cache), held per caller and written once a second.
import type { Caller } from "../identity/caller.js";
import { callerLabel, denialLogKey, topDenialsKey } from "./keys.js";
import type { LimitedRoute } from "./plan.js";
import {
  DENIAL_LOG_MAX,
  type DenialBatch,
  type DenialLog,
  type DenialRecord,
  TOP_BUCKET_MS,
} from "./stores/contract.js";

/** How often denials decided without the store are written to it. */
export const DENIAL_FLUSH_MS = 1000;

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

/**
 * Denials decided in this process, per caller log, until the next flush: every DENIAL_FLUSH_MS,
 * before the admin API reads (so an operator sees what was just denied), and at close. A failed
 * write is dropped: denial records are advisory, and a store that is down has other needs.
 */
export class DenialQueue {
  private pending = new Map<string, DenialBatch>();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly log: Pick<DenialLog, "recordDenials">) {
    this.timer = setInterval(() => void this.flush(), DENIAL_FLUSH_MS);
    this.timer.unref();
  }

  get size(): number {
    return this.pending.size;
  }

  /** Queues one denial of `limits` (spec names, in the order of the request's checks). */
  add(record: DenialRecord, atMs: number, limits: string[]): void {
    let batch = this.pending.get(record.logKey);
    if (!batch) {
      batch = { logKey: record.logKey, topKey: record.topKey, caller: record.caller, entries: [], count: 0 };
      this.pending.set(record.logKey, batch);
    }
    // The log keeps the last DENIAL_LOG_MAX; counts go to the top list in full.
    if (batch.entries.length >= DENIAL_LOG_MAX) batch.entries.shift();
    batch.entries.push({ atMs, route: record.route, limits });
    batch.count = (batch.count ?? 0) + 1;
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    await this.log.recordDenials(batch).catch(() => {});
  }

  /** Stops the timer after a last flush (a reload replaced the limiter, or shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
