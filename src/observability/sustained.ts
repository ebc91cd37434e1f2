// Callers denied without pause: usually a client retrying in a loop without backoff. A streak
// starts at a caller's first denial and lasts while its denials keep coming with no gap longer
// than `pauseMs` (admitted requests in between do not end it: the caller is still hammering).
// A streak longer than `thresholdMs` is reported once (the log names the caller; the gauge only
// counts), and the gauge drops again once the caller has paused.
export interface SustainedDenialEvents {
  /** The streak just passed the threshold: log it, once. */
  onSustained(caller: string, sinceMs: number): void;
  /** How many callers are in a sustained streak now. */
  onCount(count: number): void;
}

interface Streak {
  startedAt: number;
  lastDeniedAt: number;
  reported: boolean;
}

/** Callers tracked at once; a flood of distinct callers evicts the oldest streaks first. */
const MAX_TRACKED = 10_000;

export class SustainedDenials {
  private readonly streaks = new Map<string, Streak>();
  private sustained = 0;

  constructor(
    private readonly thresholdMs: () => number,
    private readonly events: SustainedDenialEvents,
    private readonly pauseMs = 5000,
  ) {}

  denied(caller: string, nowMs: number): void {
    let streak = this.streaks.get(caller);
    if (streak && nowMs - streak.lastDeniedAt > this.pauseMs) {
      this.end(caller, streak);
      streak = undefined;
    }
    if (!streak) {
      if (this.streaks.size >= MAX_TRACKED) {
        const oldest = this.streaks.entries().next().value;
        if (oldest) this.end(oldest[0], oldest[1]);
      }
      streak = { startedAt: nowMs, lastDeniedAt: nowMs, reported: false };
      this.streaks.set(caller, streak);
      return;
    }
    streak.lastDeniedAt = nowMs;
    if (!streak.reported && nowMs - streak.startedAt >= this.thresholdMs()) {
      streak.reported = true;
      this.sustained++;
      this.events.onSustained(caller, streak.startedAt);
      this.events.onCount(this.sustained);
    }
  }

  /** Ends the streaks of callers that paused; run it every second or so. */
  sweep(nowMs: number): void {
    for (const [caller, streak] of this.streaks) {
      if (nowMs - streak.lastDeniedAt > this.pauseMs) this.end(caller, streak);
    }
  }

  get count(): number {
    return this.sustained;
  }

  /** The callers in a sustained streak now, longest first, at most `max` (the admin API's). */
  current(max = 100): { caller: string; sinceMs: number; lastDeniedMs: number }[] {
    const out: { caller: string; sinceMs: number; lastDeniedMs: number }[] = [];
    for (const [caller, s] of this.streaks)
      if (s.reported) out.push({ caller, sinceMs: s.startedAt, lastDeniedMs: s.lastDeniedAt });
    return out.sort((a, b) => a.sinceMs - b.sinceMs).slice(0, max);
  }

  private end(caller: string, streak: Streak): void {
    this.streaks.delete(caller);
    if (streak.reported) {
      this.sustained--;
      this.events.onCount(this.sustained);
    }
  }
}
