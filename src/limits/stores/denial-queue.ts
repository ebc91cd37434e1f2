// Denials waiting to be written, per caller: those the deny cache decided in this process, and
// those check.lua decided on Redis (the script is sent nothing of a request's denial record; the
// store records the denials its replies show). Written once a second, before a read, at close.
import type { LimitCheck, LimitOutcome } from "../spec.js";
import { DENIAL_LOG_MAX, type DenialBatch, type DenialLog, type DenialRecord } from "./contract.js";

/** How often queued denials are written to the store. */
export const DENIAL_FLUSH_MS = 1000;

/** The names of the limits that denied a request, in the order of its checks; shadow limits never deny. */
export function deniedLimitNames(checks: readonly LimitCheck[], outcomes: readonly LimitOutcome[]): string[] {
  const names: string[] = [];
  for (let i = 0; i < checks.length; i++) {
    const c = checks[i]!;
    if (!outcomes[i]!.allowed && !c.spec.shadow) names.push(c.spec.name);
  }
  return names;
}

/**
 * Denials waiting to be written, per caller log, until the next flush: every DENIAL_FLUSH_MS,
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
