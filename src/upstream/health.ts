// Whether one target of an upstream may be sent requests. Two sources, one state:
//
// - Passive: what requests see. FAILURES_TO_EJECT failures in a row (connect refused or timed
//   out, reset, no answer in time; an HTTP status is an answer, even a 5xx) eject the target for
//   a back-off that doubles with each ejection in a row (1 s, 2 s, 4 s … 30 s). Then it is on
//   probation: it gets its share again but one request at a time, and the first failure ejects
//   it again for the next back-off, the first success readmits it fully.
// - Active (`health:` in the config, active-health.ts): CHECKS_TO_EJECT failed checks in a row
//   eject the target until a check passes (one lost answer or a pause of the gateway's own is not
//   an outage; requests see a dead target sooner anyway); a passing check readmits it whatever
//   ejected it.
//
// Time is read from an injected monotonic clock and the back-off ends lazily, when a pick asks:
// no timer per target, so nothing keeps the process alive and tests drive time by hand.

export const PASSIVE_HEALTH = {
  /** Failures in a row that eject a target (on probation: one). */
  failuresToEject: 3,
  /** The first ejection's back-off; each ejection in a row doubles it, up to maxBackoffMs. */
  baseBackoffMs: 1000,
  maxBackoffMs: 30_000,
} as const;

/** Failed active checks in a row that eject a target. */
export const CHECKS_TO_EJECT = 2;

export type PassiveHealthSettings = { [K in keyof typeof PASSIVE_HEALTH]: number };

export type HealthEvent =
  | { kind: "ejected"; by: "passive"; reason: string; failures: number; backoffMs: number }
  | { kind: "ejected"; by: "active"; reason: string }
  /** Back in rotation: after its back-off (on probation), or on a passing check. */
  | { kind: "returned"; by: "backoff" | "active" };

export class TargetHealth {
  private failures = 0;
  /** Passive ejection: until this monotonic time; 0 when not ejected. */
  private ejectedUntil = 0;
  /** Ejections in a row: the exponent of the next back-off. */
  private level = 0;
  private returnedAt = Number.NEGATIVE_INFINITY;
  private activeDown = false;
  private failedChecks = 0;
  private probation = false;
  /** On probation, a request is in flight: no other is sent until it ends. */
  private probing = false;

  constructor(
    private readonly clock: () => number,
    private readonly emit: (event: HealthEvent) => void,
    private readonly settings: PassiveHealthSettings = PASSIVE_HEALTH,
  ) {}

  /** Whether a request may be sent now. A back-off that has run out puts it on probation. */
  available(): boolean {
    if (this.activeDown) return false;
    if (this.ejectedUntil !== 0) {
      const now = this.clock();
      if (now < this.ejectedUntil) return false;
      this.ejectedUntil = 0;
      this.probation = true;
      this.returnedAt = now;
      this.emit({ kind: "returned", by: "backoff" });
    }
    return !(this.probation && this.probing);
  }

  /** Out of rotation now (ejected and not yet due back): what the targets gauge counts. */
  get ejected(): boolean {
    return this.activeDown || (this.ejectedUntil !== 0 && this.clock() < this.ejectedUntil);
  }

  /** A request was sent to it. */
  sent(): void {
    if (this.probation) this.probing = true;
  }

  /** A request got its answer (any status). */
  succeeded(): void {
    this.failures = 0;
    this.probing = false;
    this.probation = false;
  }

  /** A request ended without telling anything about the target (the client went away). */
  released(): void {
    this.probing = false;
  }

  /** A request failed to reach it or to get an answer from it. */
  failed(reason: string): void {
    this.probing = false;
    this.failures++;
    // Late failures of requests sent before the ejection change nothing.
    if (this.activeDown || this.ejectedUntil !== 0) return;
    if (!this.probation && this.failures < this.settings.failuresToEject) return;
    const now = this.clock();
    // A target that stayed in for a whole maximum back-off starts over from the shortest.
    if (now - this.returnedAt > this.settings.maxBackoffMs) this.level = 0;
    const backoffMs = Math.min(this.settings.baseBackoffMs * 2 ** this.level, this.settings.maxBackoffMs);
    this.level++;
    this.ejectedUntil = now + backoffMs;
    this.probation = false;
    this.emit({ kind: "ejected", by: "passive", reason, failures: this.failures, backoffMs });
    this.failures = 0;
  }

  /** An active check passed: readmitted at once, whatever ejected it. */
  checkPassed(): void {
    // On probation it was already said to be back.
    const wasOut = this.activeDown || this.ejectedUntil !== 0;
    this.failedChecks = 0;
    this.activeDown = false;
    this.ejectedUntil = 0;
    this.probation = false;
    this.probing = false;
    this.failures = 0;
    this.level = 0;
    if (wasOut) this.emit({ kind: "returned", by: "active" });
  }

  /** Its upstream no longer has health checks (a reload): what only a check could undo is undone. */
  checksRemoved(): void {
    if (!this.activeDown) return;
    this.activeDown = false;
    this.emit({ kind: "returned", by: "active" });
  }

  /** An active check failed: the second in a row takes it out until a check passes. */
  checkFailed(reason: string): void {
    if (this.activeDown) return;
    if (++this.failedChecks < CHECKS_TO_EJECT) return;
    // A back-off that ran out is said to be over first, so every ejection has its return.
    this.available();
    // Already ejected by requests: it now stays out until a check passes, said once.
    const alreadyOut = this.ejected;
    this.activeDown = true;
    this.ejectedUntil = 0;
    this.probation = false;
    this.probing = false;
    if (!alreadyOut) this.emit({ kind: "ejected", by: "active", reason });
  }
}
