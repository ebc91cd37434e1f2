// Active health checks (`upstreams.<name>.health`): every `interval`, a GET of `path` on each
// target, passing when a 2xx answers within `timeout`. The first round runs at start. Two failed
// checks in a row eject the target until a check passes (health.ts); so a target that comes back
// is readmitted within one interval.
//
// One timer per upstream, unref'd and cleared by stop(), with the checks in flight aborted:
// a removed upstream or a stopped gateway leaves nothing behind that holds the process.

export interface HealthCheckSettings {
  path: string;
  intervalMs: number;
  timeoutMs: number;
}

/** One check: resolves with null when it passed, else with why it failed. */
export type Probe<T> = (
  target: T,
  settings: HealthCheckSettings,
  signal: AbortSignal,
) => Promise<string | null>;

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/**
 * Real timers, unref'd, that fire only once the I/O that arrived meanwhile has been read
 * (deadline.ts): a gateway whose event loop lagged (its own start, a long garbage collection)
 * must not fail a check whose answer is already waiting. Cleared after they handed over, they
 * still run: every use here is harmless late (a round that sees stop(), an abort of a check that
 * is over).
 */
export const SYSTEM_TIMERS: Timers = {
  set: (fn, ms) => setTimeout(() => setImmediate(() => setImmediate(fn)), ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface Checked {
  checkPassed(): void;
  checkFailed(reason: string): void;
}

export class ActiveHealthCheck<T> {
  private timer: unknown;
  private started = false;
  private stopped = false;
  /** Checks in flight, with their timeout's timer. */
  private readonly inFlight = new Map<AbortController, unknown>();

  constructor(
    private readonly targets: readonly T[],
    private readonly healthOf: (target: T) => Checked,
    private readonly settings: HealthCheckSettings,
    private readonly probe: Probe<T>,
    private readonly timers: Timers = SYSTEM_TIMERS,
  ) {}

  /** Starts the rounds (once: a second call does nothing). */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.round();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) this.timers.clear(this.timer);
    this.timer = undefined;
    for (const [controller, timeout] of this.inFlight) {
      this.timers.clear(timeout);
      controller.abort();
    }
    this.inFlight.clear();
  }

  /** One check of every target, then the next round one interval after this one started. */
  private round(): void {
    if (this.stopped) return;
    this.timer = this.timers.set(() => this.round(), this.settings.intervalMs);
    for (const target of this.targets) void this.check(target);
  }

  private async check(target: T): Promise<void> {
    const controller = new AbortController();
    const timeout = this.timers.set(
      () => controller.abort(new Error(`no answer within ${this.settings.timeoutMs} ms`)),
      this.settings.timeoutMs,
    );
    this.inFlight.set(controller, timeout);
    let failure: string | null;
    try {
      failure = await this.probe(target, this.settings, controller.signal);
    } catch (err) {
      failure = controller.signal.aborted
        ? String((controller.signal.reason as Error | undefined)?.message ?? "aborted")
        : describe(err);
    } finally {
      this.timers.clear(timeout);
      this.inFlight.delete(controller);
    }
    // A check that ends after stop() belongs to a gateway or upstream that is gone.
    if (this.stopped) return;
    const health = this.healthOf(target);
    if (failure === null) health.checkPassed();
    else health.checkFailed(failure);
  }
}

function describe(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : (err as Error).message;
}
