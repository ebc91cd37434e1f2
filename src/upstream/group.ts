// One upstream's targets: each with its own connection pool and health, a balancer choosing
// among them per request, the retry budget, and the active checks when the config asks.
//
// When every target is ejected, requests go to all of them, balanced by weight (Envoy's panic
// mode) rather than being refused: health is a guess (a wrong health path, one network blip
// seen by every target), an upstream of one URL must behave as before there were targets, and
// a target that is really down fails fast (connection refused) or within connect_timeout.
import { ActiveHealthCheck, type HealthCheckSettings, type Probe, type Timers } from "./active-health.js";
import { SmoothWeightedRoundRobin } from "./balancer.js";
import { type HealthEvent, PASSIVE_HEALTH, type PassiveHealthSettings, TargetHealth } from "./health.js";
import { RETRY_BUDGET, RetryBudget } from "./retry-budget.js";

export interface TargetSpec {
  /** scheme://host:port */
  origin: string;
  /** host:port, for the Host header. */
  host: string;
  weight: number;
  /** Identity of the target's connection settings: a reload keeps its pool and health if equal. */
  key: string;
}

export interface Closable {
  close(): Promise<unknown>;
  destroy(): Promise<unknown>;
}

export class Target<D extends Closable = Closable> {
  readonly health: TargetHealth;
  /** Where its health events go: the group it serves (a reload may hand it to the next one). */
  report: (event: HealthEvent) => void = () => {};

  constructor(
    readonly origin: string,
    readonly host: string,
    readonly weight: number,
    readonly key: string,
    readonly dispatcher: D,
    clock: () => number,
    passive: PassiveHealthSettings,
  ) {
    this.health = new TargetHealth(clock, (event) => this.report(event), passive);
  }
}

export type RetryOutcome = "success" | "failure" | "budget_exhausted" | "no_target";

export type GroupEvent =
  | ({ upstream: string; target: string } & HealthEvent)
  | { kind: "no_healthy_target"; upstream: string; targets: number }
  | { kind: "retry"; upstream: string; outcome: RetryOutcome };

export interface GroupOptions<D extends Closable> {
  name: string;
  targets: readonly TargetSpec[];
  health: HealthCheckSettings | undefined;
  /** Monotonic ms. */
  clock: () => number;
  /** Opens a target's connection pool (lazily connecting: nothing happens until it is used). */
  dispatcher: (origin: string) => D;
  probe: Probe<Target<D>>;
  onEvent: (event: GroupEvent) => void;
  /** A target of the group this one replaces, kept with its pool and health when its key matches. */
  adopt?: ((spec: TargetSpec) => Target<D> | undefined) | undefined;
  timers?: Timers;
  passive?: PassiveHealthSettings;
}

export class UpstreamGroup<D extends Closable = Closable> {
  readonly name: string;
  readonly targets: readonly Target<D>[];
  readonly budget: RetryBudget;
  private readonly balancer: SmoothWeightedRoundRobin<Target<D>>;
  private readonly checker: ActiveHealthCheck<Target<D>> | undefined;
  private readonly onEvent: (event: GroupEvent) => void;

  constructor(options: GroupOptions<D>) {
    this.name = options.name;
    this.onEvent = options.onEvent;
    const passive = options.passive ?? PASSIVE_HEALTH;
    this.targets = options.targets.map(
      (spec) =>
        options.adopt?.(spec) ??
        new Target(
          spec.origin,
          spec.host,
          spec.weight,
          spec.key,
          options.dispatcher(spec.origin),
          options.clock,
          passive,
        ),
    );
    for (const target of this.targets) {
      target.report = (event) => this.healthEvent(target, event);
      // Adopted from a group with health checks into one without: nothing would readmit it.
      if (!options.health) target.health.checksRemoved();
    }
    this.balancer = new SmoothWeightedRoundRobin(this.targets);
    this.budget = new RetryBudget(options.clock, RETRY_BUDGET);
    this.checker =
      options.health &&
      new ActiveHealthCheck(
        this.targets,
        (target) => target.health,
        options.health,
        options.probe,
        options.timers,
      );
  }

  /**
   * The target for the next attempt of a request, never one in `tried` (a retry goes elsewhere)
   * unless the upstream has only one. Null: no other target is left to try.
   */
  pick(tried: readonly Target<D>[] = []): Target<D> | null {
    const targets = this.targets;
    if (targets.length === 1) {
      targets[0]!.health.sent();
      return targets[0]!;
    }
    const untried = (t: Target<D>) => !tried.includes(t);
    const next =
      this.balancer.next((t) => untried(t) && t.health.available()) ??
      // The only ones left in rotation are on probation with their one request in flight.
      this.balancer.next((t) => untried(t) && !t.health.ejected) ??
      // Panic: every target is ejected, so each is tried as if healthy.
      (targets.every((t) => t.health.ejected) ? this.balancer.next(untried) : null);
    next?.health.sent();
    return next;
  }

  /** Targets in rotation and ejected, for the gauge and /readyz. */
  counts(): { healthy: number; ejected: number } {
    let ejected = 0;
    for (const target of this.targets) if (target.health.ejected) ejected++;
    return { healthy: this.targets.length - ejected, ejected };
  }

  /** Each target's origin and whether it is out of rotation, for /admin/health. */
  states(): { target: string; ejected: boolean }[] {
    return this.targets.map((t) => ({ target: t.origin, ejected: t.health.ejected }));
  }

  retried(outcome: RetryOutcome): void {
    this.onEvent({ kind: "retry", upstream: this.name, outcome });
  }

  /** Starts the active checks, if the upstream has them. */
  start(): void {
    this.checker?.start();
  }

  /** Stops the active checks; the pools are the owner's to close. */
  stop(): void {
    this.checker?.stop();
  }

  private healthEvent(target: Target<D>, event: HealthEvent): void {
    this.onEvent({ upstream: this.name, target: target.origin, ...event });
    if (event.kind === "ejected" && this.targets.every((t) => t.health.ejected))
      this.onEvent({ kind: "no_healthy_target", upstream: this.name, targets: this.targets.length });
  }
}
